package runas

import (
	"errors"
	"os"
	"slices"
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
)

func rangeCfg(first, count uint32) config.RunAs {
	return config.RunAs{Mode: config.RunAsRange, FirstUID: first, Count: count}
}

// Leases of the range are distinct, skip uids live processes run as, come
// back on Release, and run out with a clear error; Reserve takes an
// adopted attempt's uid out of the pool.
func TestLeaseRange(t *testing.T) {
	l := New(rangeCfg(5000, 4), 0)
	l.liveUIDs = func() map[uint32]bool { return map[uint32]bool{5001: true} }
	if !l.Separate() {
		t.Fatal("mode range as root does not separate attempts")
	}
	a, err := l.Lease("a")
	if err != nil || a != (User{UID: 5000, GID: 5000}) || l.Group() != 5000 {
		t.Fatalf("first lease = %v, %v", a, err)
	}
	b, err := l.Lease("b")
	if err != nil || b.UID != 5002 {
		t.Fatalf("second lease = %v, %v; want 5002 (5001 is a live process's)", b, err)
	}
	l.Reserve(User{UID: 5003, GID: 5003}, "adopted")
	l.Reserve(User{UID: 42, GID: 42}, "outside the range") // ignored
	if _, err := l.Lease("c"); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("lease with the range taken: err = %v, want ErrUnavailable", err)
	}
	l.Release(a)
	if c, err := l.Lease("c"); err != nil || c.UID != 5000 {
		t.Fatalf("lease after release = %v, %v; want 5000 back", c, err)
	}
	if got := l.Held(); got != 3 {
		t.Errorf("Held = %d, want 3", got)
	}
}

// The real scan of /proc sees this test's own uid.
func TestLiveUIDsSeesOwn(t *testing.T) {
	if !liveUIDs()[uint32(os.Geteuid())] {
		t.Errorf("liveUIDs misses this process's uid %d", os.Geteuid())
	}
}

// Mode fixed gives everyone the same user (gid defaulting to the uid);
// mode manager, or any mode when the manager is not root, gives the
// manager's user and says why.
func TestLeaseFixedAndManager(t *testing.T) {
	l := New(config.RunAs{Mode: config.RunAsFixed, UID: 1234}, 0)
	if u, err := l.Lease("a"); err != nil || u != (User{UID: 1234, GID: 1234}) {
		t.Errorf("fixed lease = %v, %v", u, err)
	}
	for _, tc := range []struct {
		cfg  config.RunAs
		euid int
	}{
		{config.RunAs{Mode: config.RunAsManager}, 0},
		{rangeCfg(5000, 4), 1000},
		{config.RunAs{Mode: config.RunAsFixed, UID: 1234}, 1000},
	} {
		l := New(tc.cfg, tc.euid)
		if u, err := l.Lease("a"); err != nil || u.Other() || l.Separate() {
			t.Errorf("%+v as uid %d: lease = %v, %v, separate %v; want the manager's user", tc.cfg, tc.euid, u, err, l.Separate())
		}
		if l.Describe() == "" {
			t.Error("no description")
		}
	}
}

func TestParseStatusUIDs(t *testing.T) {
	const status = "Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t7\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n"
	if got := parseStatusUIDs(status); !slices.Equal(got, []uint32{1000, 1001, 1002, 1003}) {
		t.Errorf("parseStatusUIDs = %v", got)
	}
	for _, bad := range []string{"", "Name:\tsh\n", "Name:\tsh\nUid:\t1\t2\n", "Name:\tsh\nUid:\t1\tx\t3\t4\n"} {
		if got := parseStatusUIDs(bad); got != nil {
			t.Errorf("parseStatusUIDs(%q) = %v, want none", bad, got)
		}
	}
}

func BenchmarkLiveUIDs(b *testing.B) {
	for i := 0; i < b.N; i++ {
		liveUIDs()
	}
}
