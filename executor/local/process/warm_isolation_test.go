package process

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/testkit"
)

// An attempt's environment (its secrets: the executor sets as_env_var
// secrets there) never reaches a later warm-started attempt. Every spare
// is forked from the warm server, so the server must never have held an
// earlier attempt's environment, not even in freed memory. A real task,
// warm-started after an attempt whose environment held a secret, scans
// its whole memory for that secret's value, and for a value of its own
// environment (which it must find, or the scan proves nothing).
func TestWarmStartLeaksNoEarlierAttemptsEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Python processes")
	}
	venv := sdkVenv(t)
	root := t.TempDir()
	var tasks []sdkTask
	for name, e := range sdktest.PrepareTasks(t, "testdata/sdk_task.py", filepath.Join(root, "sdk"), "--x", "3", "--y", "4") {
		tasks = append(tasks, sdkTask{name: name, spec: e.Spec, inputDir: e.InputDir})
	}
	h := &sdkHarness{
		root:     root,
		runner:   NewRunner(Config{BinDir: filepath.Join(venv, "bin"), KillGrace: 2 * time.Second, WarmStart: true, CgroupRoot: "none"}),
		endpoint: "localhost:1", // these tasks never fan out
		runStart: time.Now(),
		tasks:    tasks,
		warm:     true,
	}
	t.Cleanup(h.runner.Close)
	waitWarm(t, h.runner, h.env(t, "ready", tasks[0], false, nil).Environ())

	// The earlier attempt holds two secrets: a CA bundle's worth of text
	// and, after it, the token searched for. The old server kept its
	// copies of a start message at the head of its receive buffers, where
	// the later attempt's own (shorter) message and runtime overwrite
	// them; behind a large variable the token outlives that, so a leak
	// shows every time instead of now and then.
	token, control := "warm-secret-"+rand.Text(), "warm-control-"+rand.Text()
	first := h.run(t, "with-secret", "add", false, nil, "E2E_CA_BUNDLE="+randomText(4000), "E2E_TOKEN="+token)
	first.succeeded(t)
	if !first.warm {
		t.Fatal("the attempt holding the secret was not warm-started")
	}

	// The server itself never held the token (its own a0 path is in its
	// memory: the scan works).
	srv := currentServer(h.runner)
	if srv == nil || srv.cmd == nil {
		t.Fatal("no warm server")
	}
	if !memoryHolds(t, srv.cmd.Process.Pid, h.runner.warm.a0) {
		t.Error("the scan of the warm server's memory does not find its own a0 path")
	}
	if memoryHolds(t, srv.cmd.Process.Pid, token) {
		t.Error("the warm server's memory holds the token of an attempt it started")
	}

	// Each value as a head and a tail (see memscan): MEMSCAN itself holds
	// neither whole.
	halves := func(v string) [2]string { return [2]string{v[:len(v)/2], v[len(v)/2:]} }
	scan, err := json.Marshal(map[string][2]string{"secret": halves(token), "control": halves(control)})
	if err != nil {
		t.Fatal(err)
	}
	later := h.run(t, "scanner", "memscan", false, nil, "MEMSCAN="+string(scan), "E2E_CONTROL="+control)
	outs := later.succeeded(t)
	if !later.warm {
		t.Fatal("the scanning attempt was not warm-started")
	}
	if len(outs.GetLiterals()) != 1 {
		t.Fatalf("outputs %v, want one", outs)
	}
	got := outs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetStringValue()
	if want := "control=found secret=absent"; got != want {
		t.Errorf("the later attempt's scan of its own memory: %q, want %q (control=found: the scan works; "+
			"secret=found: it holds the earlier attempt's secret)", got, want)
	}
}

// randomText is n random base32 words of 26 characters (unlike any text
// a process holds by itself), joined by dots.
func randomText(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = rand.Text()
	}
	return strings.Join(words, ".")
}

// memoryHolds reports whether a readable mapping of process pid (a
// descendant of the test: ptrace's access check allows it) holds value.
func memoryHolds(t *testing.T, pid int, value string) bool {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	const chunk = 16 << 20
	for _, line := range strings.Split(strings.TrimSpace(string(maps)), "\n") {
		f := strings.Fields(line)
		if f[1][0] != 'r' || slices.Contains([]string{"[vvar]", "[vvar_vclock]", "[vsyscall]"}, f[len(f)-1]) {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("maps line %q", line)
		}
		for pos := start; pos < end; pos += chunk - uint64(len(value)) {
			buf := make([]byte, min(chunk, end-pos))
			n, _ := mem.ReadAt(buf, int64(pos))
			if bytes.Contains(buf[:n], []byte(value)) {
				return true
			}
			if n < len(buf) || pos+uint64(n) >= end {
				break // the rest cannot be read, or there is none
			}
		}
	}
	return false
}

// Each spare's channel is the manager's and that spare's alone: no other
// spare and not the server holds either end (the server cannot even
// receive what the manager sends a spare). The manager closes the channel
// of a spare that died, and a spare whose channel closes exits; either
// way it is reaped, and later attempts are warm-started by the others.
func TestWarmSpareChannels(t *testing.T) {
	venv := sdkVenv(t)
	old := warmSpares
	warmSpares = 2
	t.Cleanup(func() { warmSpares = old })
	r := warmRunner(t, venv)
	srv := currentServer(r)
	var idle []*warmSpare
	testkit.Eventually(t, "two idle spares", 3*time.Minute, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		idle = slices.Clone(srv.idle)
		return len(idle) == 2
	})

	holders := map[string][]string{} // socket inode → the processes holding it
	for in := range socketInodes(t, srv.cmd.Process.Pid) {
		holders[in] = append(holders[in], "the server")
	}
	for _, sp := range idle {
		for in := range socketInodes(t, sp.pid) {
			holders[in] = append(holders[in], fmt.Sprintf("spare %d", sp.pid))
		}
	}
	for _, sp := range idle {
		if who := holders[connInode(t, sp.conn)]; len(who) > 0 {
			t.Errorf("%v hold the manager's end of spare %d's channel", who, sp.pid)
		}
	}
	for in, who := range holders {
		if len(who) > 1 {
			t.Errorf("%v hold the same socket %s", who, in)
		}
	}

	// A spare that dies: the manager drops it and closes its channel.
	dead, orphan := idle[0], idle[1]
	if err := syscall.Kill(dead.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A spare whose channel the manager closes (as when it gives up on a
	// handover) exits by itself.
	srv.mu.Lock()
	srv.idle = slices.DeleteFunc(srv.idle, func(sp *warmSpare) bool { return sp == orphan })
	srv.mu.Unlock()
	orphan.close()
	for _, sp := range idle {
		testkit.Eventually(t, fmt.Sprintf("spare %d to be gone and reaped", sp.pid), patience, func() bool {
			_, err := os.Stat("/proc/" + strconv.Itoa(sp.pid))
			return os.IsNotExist(err)
		})
	}
	srv.mu.Lock()
	for _, sp := range srv.idle {
		if sp == dead {
			t.Error("the dead spare is still offered to attempts")
		}
	}
	srv.mu.Unlock()
	if err := sendWarmMsg(dead.conn, warmMsg{Op: "go"}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("the dead spare's channel is still open (a send: %v)", err)
	}

	a := newAttempt(t)
	p := start(t, r, warmSpec(a, venv, `exit 0`))
	if st := p.Wait(); !p.Warm() || st.Code != 0 {
		t.Errorf("warm %v, status %+v: want a warm start by a new spare", p.Warm(), st)
	}
	if srv != currentServer(r) {
		t.Error("the warm server was replaced")
	}
}

// socketInodes are the sockets process pid holds ("socket:[inode]").
func socketInodes(t *testing.T, pid int) map[string]bool {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		if link, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(link, "socket:") {
			out[link] = true
		}
	}
	return out
}

// connInode is the socket of the manager's end of a channel.
func connInode(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	var rerr error
	if err := raw.Control(func(fd uintptr) { link, rerr = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)) }); err != nil {
		t.Fatal(err)
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
	return link
}
