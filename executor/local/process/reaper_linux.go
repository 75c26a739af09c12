package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// The manager is a child subreaper (PR_SET_CHILD_SUBREAPER): a process an
// attempt detaches (setsid, double fork) is re-parented to the manager when
// its parent dies, instead of to init. That keeps it visible as a
// descendant, and it means the manager must reap such orphans or their
// zombies pile up.
//
// Reaping must never take the exit status that os/exec is waiting for (the
// attempt leaders, and in tests any other command the process runs). So
// the reaper never waits on "any child": it lists its zombie children in
// /proc and waits on each one by pid, and only on those that are provably
// adopted orphans of an attempt:
//
//   - its process group is the group of an attempt that is still tracked,
//     and it is not that attempt's leader. The group's number is the
//     leader's pid, and the leader is reaped only after its attempt is
//     untracked (Process waits for its exit with WNOWAIT, kills and reaps
//     the leftovers, untracks, and only then lets os/exec reap it), so the
//     number cannot have been reused by another process meanwhile; or
//   - it is in another session than the manager's. Nothing the manager
//     starts itself calls setsid, so a child of ours in another session
//     was adopted.
//
// Starting an attempt holds reaper.mu shared from the fork until its group
// is tracked; a reaping pass holds it exclusively, so it never sees a
// child it cannot yet tell apart.
var reaper struct {
	mu      sync.RWMutex
	leaders map[int]bool // attempt leaders: os/exec reaps them
	groups  map[int]int  // attempt process groups → attempts in them
	on      bool
	self    int
	sid     int
}

// EnableSubreaper makes the manager process a child subreaper and starts
// reaping adopted orphans. It is idempotent; the setting lasts for the life
// of the process.
func EnableSubreaper() error {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.on {
		return nil
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	st, err := readStat(os.Getpid())
	if err != nil {
		return err
	}
	reaper.on, reaper.self, reaper.sid = true, os.Getpid(), st.session
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	go func() {
		// SIGCHLD is coalesced and os/exec's own children raise it too;
		// the timer catches anything a lost signal left behind.
		t := time.NewTicker(10 * time.Second)
		for {
			select {
			case <-ch:
			case <-t.C:
			}
			reapOrphans()
		}
	}()
	return nil
}

func init() {
	reaper.leaders = map[int]bool{}
	reaper.groups = map[int]int{}
}

// trackLocked registers a started attempt (leader pid, its process group).
// The caller holds reaper.mu shared since before the fork, which keeps
// reapOrphans (exclusive) out; trackMu orders the starters among
// themselves.
func trackLocked(pid, pgid int) {
	trackMu.Lock()
	reaper.leaders[pid] = true
	reaper.groups[pgid]++
	trackMu.Unlock()
}

var trackMu sync.Mutex

// untrack forgets an attempt whose leader exited (not reaped yet) and
// whose leftovers were killed, once the zombies they left are reaped: a
// killed process may take a moment to be re-parented to the manager, so
// it waits (briefly) until nothing but the leader is left in the group.
// (The group is looked for among every process, not only the manager's
// children: a killed process whose parent is still exiting is re-parented
// to the manager only after it left its cgroup.)
func untrack(pid, pgid int) {
	deadline := time.Now().Add(leftoverKillTimeout)
	for {
		reapOrphans()
		if !reaper.on || !groupHasOthers(pgid, pid) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	delete(reaper.leaders, pid)
	if reaper.groups[pgid]--; reaper.groups[pgid] <= 0 {
		delete(reaper.groups, pgid)
	}
}

// groupHasOthers reports whether any process but leader, zombies
// included, is in process group pgid.
func groupHasOthers(pgid, leader int) bool {
	found := false
	forEachProc(func(pid int, st procStat) {
		if st.pgrp == pgid && pid != leader {
			found = true
		}
	})
	return found
}

// forEachChild calls fn for each child of the manager process: those
// /proc/self/task/*/children list (every thread's: a child belongs to
// the thread that forked it, or adopted it), which is far fewer reads
// than every process on the host. Without that file (a kernel built
// without CONFIG_PROC_CHILDREN) it looks at every process. A child
// forked or adopted while the files are read may be missed; the reaper
// runs again at the next SIGCHLD and on its timer.
func forEachChild(fn func(pid int, st procStat)) {
	self := os.Getpid()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		forEachProc(func(pid int, st procStat) {
			if st.ppid == self {
				fn(pid, st)
			}
		})
		return
	}
	seen := map[int]bool{}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && t.Name() == strconv.Itoa(self) {
				// No children files at all: the main thread always exists.
				forEachProc(func(pid int, st procStat) {
					if st.ppid == self {
						fn(pid, st)
					}
				})
				return
			}
			continue // a thread that ended meanwhile
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || seen[pid] {
				continue
			}
			seen[pid] = true
			if st, err := readStat(pid); err == nil && st.ppid == self {
				fn(pid, st)
			}
		}
	}
}

// reapOrphans reaps the zombie children that are adopted orphans (see the
// rules above) and reports how many it reaped.
func reapOrphans() int {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if !reaper.on {
		return 0
	}
	n := 0
	forEachChild(func(pid int, st procStat) {
		if st.ppid != reaper.self || !st.zombie() || reaper.leaders[pid] {
			return
		}
		if reaper.groups[st.pgrp] == 0 && st.session == reaper.sid {
			return
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	})
	return n
}

// waitExitedNoReap blocks until the child pid has exited, leaving it a
// zombie for os/exec to reap (waitid with WNOWAIT).
func waitExitedNoReap(pid int) error {
	const pPID = 1     // P_PID from <sys/wait.h>
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return errno
	}
}
