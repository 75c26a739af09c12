// Package testkit is the support every package's tests share: waiting for a
// condition (Eventually, Poll), a buffer that a process or logger writes
// while the test reads and waits on it (Buffer), and a free TCP port
// (FreePort). Waits take the caller's bound: the machines that run the suites
// are often loaded, and each caller knows how long its condition may take.
//
// It imports no service and no executor package, so internal/ packages may
// use it too (manager/compose's layering test).
package testkit

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Poll calls cond until it returns "" or timeout has passed, pausing every
// between calls, and returns cond's last answer: "" when the condition came
// true, else its last complaint, for the caller to report.
//
//	if msg := testkit.Poll(time.Minute, 200*time.Millisecond, func() string { ... }); msg != "" {
//		t.Fatal(msg)
//	}
func Poll(timeout, every time.Duration, cond func() string) string {
	return poll(timeout, func(int) time.Duration { return every }, cond)
}

// Eventually polls cond until it holds, failing t when it does not within
// timeout; what names the condition in the failure ("timed out waiting for
// <what>"). It polls often at first and backs off to every 50 ms.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if poll(timeout, backoff, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	}) != "" {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// EventuallyErr is Eventually for a condition that can say why it does not
// hold yet: the failure quotes cond's last error.
func EventuallyErr(t testing.TB, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	var last error
	if poll(timeout, backoff, func() string {
		ok, err := cond()
		if ok {
			return ""
		}
		last = err
		return "not yet"
	}) != "" {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
	}
}

// backoff is Eventually's pause before the (n+1)th call: 10 ms, doubling
// up to 50 ms.
func backoff(n int) time.Duration {
	return min(10*time.Millisecond<<min(n, 3), 50*time.Millisecond)
}

func poll(timeout time.Duration, pause func(n int) time.Duration, cond func() string) string {
	deadline := time.Now().Add(timeout)
	for n := 0; ; n++ {
		msg := cond()
		if msg == "" || !time.Now().Before(deadline) {
			return msg
		}
		time.Sleep(pause(n))
	}
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Buffer is an io.Writer that others may read while a process, a logger or
// goroutines write to it, and wait on for some text to appear. The zero
// value is ready to use.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	waiters []waiter
}

type waiter struct {
	match func(string) string
	ch    chan struct{}
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		if w.match(b.buf.String()) != "" {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	b.waiters = kept
	return n, err
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail is the last n lines of the buffer, preceded by a line saying how
// many earlier ones it leaves out.
func (b *Buffer) Tail(n int) string {
	lines := strings.SplitAfter(b.String(), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "")
	}
	return fmt.Sprintf("[%d earlier lines left out]\n", len(lines)-n) + strings.Join(lines[len(lines)-n:], "")
}

// Await returns a channel that is closed once match finds something (a
// non-empty string) in the buffer, at once if it already does.
func (b *Buffer) Await(match func(string) string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	if match(b.buf.String()) != "" {
		close(ch)
	} else {
		b.waiters = append(b.waiters, waiter{match, ch})
	}
	return ch
}

// AwaitText is Await for the text s.
func (b *Buffer) AwaitText(s string) <-chan struct{} {
	return b.Await(func(text string) string {
		if strings.Contains(text, s) {
			return s
		}
		return ""
	})
}

// TaskDir is a t.TempDir that task processes can use whatever user they
// run as (executor.local.runAs gives each attempt a uid of its own when the
// tests run as root): the directory is 0777 with a default ACL that makes
// what anyone creates in it (and in its subdirectories) readable and
// writable by all, whatever their umask (attempts run with 077), and the
// test's temporary root above it 0711 (anyone may pass through, not list).
// Hand a task this, never a bare t.TempDir, when the task reads or writes
// it, or when several attempts share a file in it.
func TaskDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(dir, "system.posix_acl_default", openACL, 0); err != nil {
		t.Logf("no default ACL on %s (%v): files tasks create there keep their umask", dir, err)
	}
	return dir
}

// openACL is the xattr form of the ACL u::rwx,g::rwx,o::rwx (version 2,
// then each entry's tag, permissions and id, little-endian).
var openACL = []byte{
	2, 0, 0, 0,
	0x01, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, // ACL_USER_OBJ
	0x04, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, // ACL_GROUP_OBJ
	0x20, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, // ACL_OTHER
}
