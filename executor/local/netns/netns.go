// Package netns gives a process a network namespace of its own (only a
// loopback interface, brought up) and lets the manager reach into it.
//
// Why: an app binds the port it chooses (8080 by default, often on
// 127.0.0.1 only), so two replicas of one app on the host's network would
// fight over it, and a replica could reach whatever listens on the host's
// loopback (the manager's database, other apps). In a namespace of its own
// each replica has its own 127.0.0.1:8080 and sees nothing of the host's.
//
// How the manager reaches in: a socket belongs to the network namespace of
// the thread that created it, for its whole life, whichever thread uses it
// later. So Dial and Listen run on a goroutine locked to its OS thread,
// which enters the namespace (setns), creates the socket, and goes back to
// the manager's namespace; the socket then works from any goroutine. A
// thread that cannot go back is never unlocked, so the Go runtime ends it
// with its goroutine and no other goroutine ever runs in the replica's
// namespace. This keeps everything in the manager's process: no helper
// binary to re-execute, nothing to supervise, and the namespace is held by
// an open file (NS), so it lives exactly as long as the manager needs it.
//
// New makes a namespace on a thread of its own, which it then lets end;
// the thread that forks the process joins it (Join) before the fork, and
// the child inherits it. So whatever the manager listens on inside (its
// own address, for the replica to reach it) is there before the process
// starts.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// NS is a network namespace, held open.
type NS struct {
	f *os.File
}

// New makes a network namespace with its loopback interface up. The
// caller closes it.
func New() (*NS, error) {
	type made struct {
		ns  *NS
		err error
	}
	done := make(chan made, 1)
	go func() {
		// Never unlocked: the thread, now in the new namespace, ends
		// with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- made{err: fmt.Errorf("netns: new network namespace: %w", err)}
			return
		}
		if err := loUp(); err != nil {
			done <- made{err: err}
			return
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			done <- made{err: fmt.Errorf("netns: %w", err)}
			return
		}
		done <- made{ns: &NS{f: f}}
	}()
	m := <-done
	return m.ns, m.err
}

// Join moves the calling OS thread into n; the thread must be locked and
// never be unlocked again (the thread that forks n's process).
func (n *NS) Join() error {
	if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("netns: join: %w", err)
	}
	return nil
}

// loUp brings the loopback interface of the calling thread's namespace up
// (a new namespace's starts down).
func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("netns: loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netns: loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netns: bring loopback up: %w", err)
	}
	return nil
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Supported reports whether this host lets the manager make network
// namespaces (root, or CAP_SYS_ADMIN, and no seccomp policy against it),
// found out once by making one; the error says why not.
func Supported() error {
	probeOnce.Do(func() {
		ns, err := New()
		if err == nil {
			_ = ns.Close()
		}
		probeErr = err
	})
	return probeErr
}

// Close lets the namespace go once nothing else holds it (its processes
// ended, its sockets closed).
func (n *NS) Close() error {
	if n == nil || n.f == nil {
		return nil
	}
	return n.f.Close()
}

// in runs fn on a fresh OS thread inside the namespace and returns what it
// returns; the sockets fn makes belong to the namespace.
func (n *NS) in(fn func() error) error {
	if n == nil || n.f == nil {
		return errors.New("netns: no namespace")
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns: %w", err)
			return
		}
		defer self.Close()
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns: enter: %w", err)
			return
		}
		err = fn()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else: stays locked, and the thread ends with this goroutine
		done <- err
	}()
	return <-done
}

// Dial connects to addr inside the namespace (a TCP address, as seen from
// within: 127.0.0.1:8080 is the namespace's own loopback).
func (n *NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.in(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on addr inside the namespace.
func (n *NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.in(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}
