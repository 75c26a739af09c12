// Package runas decides which user each attempt of the local executor runs
// as (executor.local.runAs). A manager running as root gives every running
// attempt a uid of its own from a range (mode range, the default), or one
// fixed user to all (mode fixed); either way never its own. A manager that
// is not root cannot start a process as anyone else, so there every attempt
// runs as the manager's user, as with mode manager.
//
// A uid of the range is leased to one attempt at a time: Lease hands out
// the next free one, skipping uids that a live process already runs as (a
// leftover of an earlier manager, or another program's user); Reserve takes
// the uid of an attempt a restarted manager adopts (recorded in its
// process.json); Release gives it back when the attempt ended and nothing
// of it runs any more.
package runas

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
)

// User is who an attempt runs as. The zero User means the manager's own
// user (nothing to change).
type User struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Other reports whether u is another user than the manager's.
func (u User) Other() bool { return u != User{} }

func (u User) String() string {
	if !u.Other() {
		return "the manager's user"
	}
	return fmt.Sprintf("uid %d gid %d", u.UID, u.GID)
}

// Leaser hands out users to attempts.
type Leaser struct {
	mode     string
	first    uint32
	count    uint32
	fixed    User
	group    uint32 // the group of every attempt in mode range
	why      string // why attempts run as the manager's user ("" when they do not)
	liveUIDs func() map[uint32]bool

	mu    sync.Mutex
	inUse map[uint32]string // uid -> the attempt holding it (mode range)
	next  uint32            // offset of the next uid to try
	// live and liveAt: the last scan of /proc, reused for liveTTL (a scan
	// reads every process's status; attempts start far more often).
	live   map[uint32]bool
	liveAt time.Time
}

// liveTTL is how long a scan of the live processes' uids is reused. A uid
// that a process took since is still never leased twice by this manager
// (inUse); only another program's brand-new user could be missed for that
// long.
const liveTTL = time.Second

// New returns the leaser cfg describes. euid is the manager's effective
// uid (os.Geteuid()): only root can run attempts as another user.
// A zero cfg (or zero fields of mode range) means the defaults: mode
// range from config.DefaultRunAsFirstUID.
func New(cfg config.RunAs, euid int) *Leaser {
	if cfg.Mode == "" {
		cfg.Mode = config.RunAsRange
	}
	if cfg.Mode == config.RunAsRange && cfg.FirstUID == 0 {
		cfg.FirstUID = config.DefaultRunAsFirstUID
	}
	if cfg.Mode == config.RunAsRange && cfg.Count == 0 {
		cfg.Count = config.DefaultRunAsCount
	}
	l := &Leaser{mode: cfg.Mode, first: cfg.FirstUID, count: cfg.Count, inUse: map[uint32]string{}, liveUIDs: liveUIDs}
	switch {
	case cfg.Mode == config.RunAsManager:
		l.why = "executor.local.runAs.mode is manager"
	case euid != 0:
		l.why = fmt.Sprintf("the manager does not run as root (uid %d), so it cannot start processes as another user; "+
			"executor.local.runAs.mode %s needs root", euid, cfg.Mode)
		l.mode = config.RunAsManager
	case cfg.Mode == config.RunAsFixed:
		gid := cfg.GID
		if gid == 0 {
			gid = cfg.UID
		}
		l.fixed = User{UID: cfg.UID, GID: gid}
	case cfg.Mode == config.RunAsRange:
		l.group = cfg.GID
		if l.group == 0 {
			l.group = cfg.FirstUID
		}
	}
	if l.why != "" {
		l.mode = config.RunAsManager
	}
	return l
}

// Group is the group every attempt runs as (0 in mode manager): the
// manager's data that attempts read (blobs: inputs, code bundles) belongs
// to it, what only the manager reads does not.
func (l *Leaser) Group() uint32 {
	switch l.mode {
	case config.RunAsRange:
		return l.group
	case config.RunAsFixed:
		return l.fixed.GID
	}
	return 0
}

// Separate reports whether attempts run as users other than the manager's.
func (l *Leaser) Separate() bool { return l.mode != config.RunAsManager }

// Describe says in a sentence who attempts run as (logged once at start).
func (l *Leaser) Describe() string {
	switch l.mode {
	case config.RunAsRange:
		return fmt.Sprintf("each running attempt runs as a uid of its own from %d to %d (group %d, no supplementary groups, no_new_privs)",
			l.first, uint64(l.first)+uint64(l.count)-1, l.group)
	case config.RunAsFixed:
		return fmt.Sprintf("every attempt runs as %s (no supplementary groups, no_new_privs)", l.fixed)
	}
	return "every attempt runs as the manager's user: " + l.why
}

// Lease returns the user attempt (a name for messages) runs as. In mode
// range it is a uid no other running attempt holds and no live process
// runs as; the error says every uid of the range is taken.
func (l *Leaser) Lease(attempt string) (User, error) {
	switch l.mode {
	case config.RunAsManager:
		return User{}, nil
	case config.RunAsFixed:
		return l.fixed, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live == nil || time.Since(l.liveAt) > liveTTL {
		l.live, l.liveAt = l.liveUIDs(), time.Now()
	}
	live := l.live
	for i := uint32(0); i < l.count; i++ {
		off := (l.next + i) % l.count
		uid := l.first + off
		if _, taken := l.inUse[uid]; taken || live[uid] {
			continue
		}
		l.inUse[uid] = attempt
		l.next = (off + 1) % l.count
		return User{UID: uid, GID: l.group}, nil
	}
	return User{}, fmt.Errorf("%w: every uid of executor.local.runAs (%d from %d) is held by a running attempt or a live process",
		errs.ErrUnavailable, l.count, l.first)
}

// Reserve marks u as held by attempt: the user of an attempt a restarted
// manager found (recorded in its process.json), so that no new attempt is
// given it while anything of that one may still run. Users outside the
// range need no reservation.
func (l *Leaser) Reserve(u User, attempt string) {
	if !l.inRange(u.UID) {
		return
	}
	l.mu.Lock()
	l.inUse[u.UID] = attempt
	l.mu.Unlock()
}

// Release gives u back once nothing of the attempt holding it runs.
func (l *Leaser) Release(u User) {
	if !l.inRange(u.UID) {
		return
	}
	l.mu.Lock()
	delete(l.inUse, u.UID)
	l.mu.Unlock()
}

// Held is how many uids of the range running attempts hold.
func (l *Leaser) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.inUse)
}

func (l *Leaser) inRange(uid uint32) bool {
	return l.mode == config.RunAsRange && uid >= l.first && uint64(uid) < uint64(l.first)+uint64(l.count)
}

// liveUIDs is the set of real and effective uids of the live processes
// (from the owners of /proc/<pid>, which are the effective uid, and the
// Uid line of each status).
func liveUIDs() map[uint32]bool {
	out := map[uint32]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) == nil {
			out[st.Uid] = true
		}
		for _, uid := range statusUIDs("/proc/" + e.Name() + "/status") {
			out[uid] = true
		}
	}
	return out
}

// statusUIDs reads the Uid line (real, effective, saved, filesystem).
func statusUIDs(path string) []uint32 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return parseStatusUIDs(string(b))
}

// parseStatusUIDs finds the Uid line of a /proc/<pid>/status without
// scanning every line with fmt (Lease reads one status per process).
func parseStatusUIDs(status string) []uint32 {
	i := strings.Index(status, "\nUid:")
	if i < 0 {
		return nil
	}
	line := status[i+len("\nUid:"):]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := strings.Fields(line)
	if len(f) != 4 {
		return nil
	}
	out := make([]uint32, 0, 4)
	for _, v := range f {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil
		}
		out = append(out, uint32(n))
	}
	return out
}
