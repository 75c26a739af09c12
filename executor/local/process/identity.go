package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Identity names an attempt's process group across manager restarts. A pid
// alone is not enough: after the process exits the kernel may hand the same
// number to an unrelated process. The start time (in clock ticks since boot,
// field 22 of /proc/<pid>/stat) and the boot ID pin down which process it was.
type Identity struct {
	PID int `json:"pid"`
	// PGID is the process group; attempts lead their own group, so it
	// equals PID.
	PGID int `json:"pgid"`
	// StartTicks is the leader's start time in clock ticks since boot.
	StartTicks uint64 `json:"startTicks"`
	// BootID is /proc/sys/kernel/random/boot_id when the process started.
	BootID string `json:"bootID"`
}

func (id Identity) String() string {
	return fmt.Sprintf("pid %d (pgid %d, start %d)", id.PID, id.PGID, id.StartTicks)
}

// procStat is the part of /proc/<pid>/stat we use.
type procStat struct {
	state      byte
	ppid       int
	pgrp       int
	session    int
	startTicks uint64
}

func readStat(pid int) (procStat, error) {
	buf := statBufs.Get().(*[]byte)
	defer statBufs.Put(buf)
	b, err := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", *buf)
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// statBufs hold the reads of /proc/<pid>/stat, a line of a few hundred
// bytes: the scans of every process read one per process.
var statBufs = sync.Pool{New: func() any { b := make([]byte, 1024); return &b }}

// readSmall reads a small file into buf with one read (open, read,
// close: os.ReadFile also stats the file and reads again for EOF),
// falling back to os.ReadFile if it does not fit.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var n int
	for {
		n, err = syscall.Read(fd, buf)
		if err != syscall.EINTR {
			break
		}
	}
	syscall.Close(fd)
	switch {
	case err != nil:
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	case n == len(buf):
		return os.ReadFile(path)
	}
	return buf[:n], nil
}

// parseStat reads "pid (comm) state ppid pgrp session ... starttime ...".
// comm may contain spaces and parentheses, so fields are counted from the
// last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("malformed stat: %d fields", len(f)+2)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	session, err4 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed stat: %v", err)
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, session: session, startTicks: start}, nil
}

func (s procStat) zombie() bool { return s.state == 'Z' || s.state == 'X' }

var bootID = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}()

// ReadIdentity captures the identity of a running process.
func ReadIdentity(pid int) (Identity, error) {
	st, err := readStat(pid)
	if err != nil {
		return Identity{}, fmt.Errorf("identity of pid %d: %w", pid, err)
	}
	return Identity{PID: pid, PGID: st.pgrp, StartTicks: st.startTicks, BootID: bootID}, nil
}

// leaderState says what became of an identity's leader pid.
type leaderState int

const (
	leaderGone     leaderState = iota // no such pid (or a zombie of it)
	leaderOurs                        // same pid, same start time, running
	leaderRecycled                    // the pid now belongs to another process
)

func (id Identity) leader() leaderState {
	if id.PID <= 0 || (id.BootID != "" && bootID != "" && id.BootID != bootID) {
		// Another boot: nothing of it survives.
		return leaderRecycled
	}
	st, err := readStat(id.PID)
	switch {
	case err != nil:
		return leaderGone
	case st.startTicks != id.StartTicks:
		return leaderRecycled
	case st.zombie():
		return leaderGone
	}
	return leaderOurs
}

// groupMembers lists live (non-zombie) processes in process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	forEachProc(func(pid int, st procStat) {
		if st.pgrp == pgid && !st.zombie() {
			out = append(out, pid)
		}
	})
	return out
}

// procScans counts forEachProc's passes over every process (for the
// tests: each reads a file per process on the host).
var procScans atomic.Int64

func forEachProc(fn func(pid int, st procStat)) {
	procScans.Add(1)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			fn(pid, st)
		}
	}
}

// GroupAlive reports whether the process group id names still has live
// members that belong to it. A recycled leader pid means the group is gone:
// the kernel does not reuse a pid while a process group of that number
// exists, so a new process under the old pid proves the old group empty.
func GroupAlive(id Identity) bool {
	switch id.leader() {
	case leaderOurs:
		return true
	case leaderRecycled:
		return false
	}
	return id.PGID > 0 && len(groupMembers(id.PGID)) > 0
}

// signalGroup sends sig to the group of id unless its leader pid was
// recycled (then the group is not ours any more).
func signalGroup(id Identity, sig syscall.Signal) error {
	if id.PGID <= 0 || id.leader() == leaderRecycled {
		return nil
	}
	if err := syscall.Kill(-id.PGID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal group %d: %w", id.PGID, err)
	}
	return nil
}

// KillOrphan stops the process group of an attempt that a previous manager
// started: SIGTERM, up to grace for it to exit, then SIGKILL. It never
// signals a recycled pid: a group whose leader pid now belongs to another
// process is left alone. It reports whether anything was signalled; the
// error says the group survived SIGKILL (or could not be signalled).
func KillOrphan(id Identity, grace time.Duration) (bool, error) {
	if !GroupAlive(id) {
		return false, nil
	}
	if err := signalGroup(id, syscall.SIGTERM); err != nil {
		return true, err
	}
	if waitGone(id, grace) {
		return true, nil
	}
	if err := signalGroup(id, syscall.SIGKILL); err != nil {
		return true, err
	}
	if !waitGone(id, 5*time.Second) {
		return true, fmt.Errorf("process group of %s survived SIGKILL", id)
	}
	return true, nil
}

func waitGone(id Identity, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !GroupAlive(id) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// descendants snapshots the live descendants of pid (children of children,
// including those that left the process group), each with its identity so a
// later signal can skip pids that were recycled meanwhile.
func descendants(pid int) []Identity {
	children := map[int][]int{}
	stats := map[int]procStat{}
	forEachProc(func(p int, st procStat) {
		children[st.ppid] = append(children[st.ppid], p)
		stats[p] = st
	})
	var out []Identity
	queue := append([]int(nil), children[pid]...)
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if st := stats[p]; !st.zombie() {
			out = append(out, Identity{PID: p, PGID: st.pgrp, StartTicks: st.startTicks, BootID: bootID})
		}
		queue = append(queue, children[p]...)
	}
	return out
}

// signalIfSame signals one process if it is still the one id names.
func signalIfSame(id Identity, sig syscall.Signal) {
	if id.leader() == leaderOurs {
		_ = syscall.Kill(id.PID, sig)
	}
}
