package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/testkit"
)

// detachScript starts two processes that leave the attempt's process
// group and tree: one in a session of its own (setsid), both orphaned by
// a parent that exits at once (a double fork). Each pid is written down.
const detachScript = `setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ../setsid.pid' &
( sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ../double.pid ) &
while [ ! -s ../setsid.pid ] || [ ! -s ../double.pid ]; do sleep 0.01; done
`

// containmentModes are the ways an attempt can be contained here: the
// host's default (cgroup v1 on the CI machines), cgroup v2 without
// controllers (the hybrid layout's empty unified hierarchy) and none.
func containmentModes(t *testing.T) map[string]string {
	modes := map[string]string{"none": "none"}
	if os.Geteuid() == 0 {
		modes["default"] = ""
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
			modes["v2"] = "/sys/fs/cgroup/unified"
		}
	}
	if len(modes) == 1 {
		t.Log("not root: only the containment without cgroups is tested")
	}
	return modes
}

func TestDetachedProcessesDieWithTheAttempt(t *testing.T) {
	if err := EnableSubreaper(); err != nil {
		t.Fatalf("subreaper: %v", err)
	}
	for name, root := range containmentModes(t) {
		for _, end := range []string{"exit", "abort"} {
			t.Run(name+"/"+end, func(t *testing.T) {
				r := NewRunner(Config{KillGrace: 30 * time.Second, CgroupRoot: root})
				if name != "none" && !r.Cgroups() {
					t.Fatalf("no cgroup on a host that allows one: %s", r.Containment())
				}
				a := newAttempt(t)
				// The attempt ends when the test says so, once it saw the
				// detached processes run.
				script := detachScript + "while [ ! -e ../release ]; do sleep 0.01; done\n"
				if end == "abort" {
					script = detachScript + "exec sleep 300\n"
				}
				p := start(t, r, a.spec(script))
				base := filepath.Dir(a.dir)
				setsid := readPid(t, filepath.Join(base, "setsid.pid"))
				double := readPid(t, filepath.Join(base, "double.pid"))
				if !alive(setsid) || !alive(double) {
					st1, e1 := readStat(setsid)
					st2, e2 := readStat(double)
					t.Fatalf("the detached processes did not start: %d %+v %v, %d %+v %v", setsid, st1, e1, double, st2, e2)
				}
				if end == "abort" {
					p.Abort("test abort")
				} else if err := os.WriteFile(filepath.Join(base, "release"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				st := p.Wait()
				if end == "exit" && (st.Code != 0 || st.Signal != "") {
					t.Fatalf("status %+v", st)
				}
				// Killed before Wait returns, and reaped by the manager
				// (their adoptive parent) soon after.
				for _, pid := range []int{setsid, double} {
					if alive(pid) {
						t.Errorf("pid %d survived the end of the attempt", pid)
					}
					testkit.Eventually(t, "pid "+strconv.Itoa(pid)+" reaped", 30*time.Second, func() bool {
						_, err := os.Stat("/proc/" + strconv.Itoa(pid))
						return os.IsNotExist(err)
					})
				}
				// An abort's SIGTERM to the tree may already have got them.
				lines, _ := ReadLog(a.log)
				if end == "exit" && !containsMsg(lines, System, "process(es) the attempt left running") {
					t.Errorf("log does not say leftovers were killed:\n%s", strings.Join(messages(lines, System), "\n"))
				}
				assertCgroupRemoved(t, r, a.dir)
			})
		}
	}
}

// assertCgroupRemoved checks that the attempt's cgroup is gone.
func assertCgroupRemoved(t *testing.T, r *Runner, dir string) {
	t.Helper()
	parents := []string{r.cg.v2}
	for _, p := range r.cg.v1 {
		parents = append(parents, p)
	}
	for _, p := range parents {
		if p == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, cgroupName(dir))); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left behind (%v)", filepath.Join(p, cgroupName(dir)), err)
		}
	}
}

// allocScript touches n MiB of memory (written, so every page is charged)
// and says so.
func allocScript(mib int) string {
	return fmt.Sprintf(`exec python3 -c 'b = b"x" * (%d << 20); print("allocated", len(b))'`, mib)
}

func cgroupRunner(t *testing.T) *Runner {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	r := NewRunner(Config{KillGrace: 30 * time.Second})
	if !r.cg.ok() || !r.cg.memory || !r.cg.cpu {
		t.Skipf("this host gives no cgroup with memory and cpu limits: %s", r.Containment())
	}
	return r
}

func TestMemoryLimitEndsTheAttemptAsOOM(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	r := cgroupRunner(t)
	limit := Limits{MemoryBytes: 200 << 20}

	a := newAttempt(t)
	s := a.spec(allocScript(600))
	s.Limits = limit
	st := start(t, r, s).Wait()
	if !st.OOMKilled || st.MemoryLimit != 200<<20 || st.Signal != "killed" {
		t.Fatalf("600 MB under a 200Mi limit: status %+v, want an OOM kill", st)
	}
	lines, _ := ReadLog(a.log)
	if !containsMsg(lines, System, "over its memory limit of 200Mi") {
		t.Errorf("log does not name the limit:\n%s", strings.Join(messages(lines, System), "\n"))
	}
	assertCgroupRemoved(t, r, a.dir)

	// Within the limit it runs as usual.
	b := newAttempt(t)
	s = b.spec(allocScript(50))
	s.Limits = limit
	st = start(t, r, s).Wait()
	if st.OOMKilled || st.Code != 0 || st.Signal != "" {
		t.Fatalf("50 MB under a 200Mi limit: status %+v", st)
	}

	// A SIGKILL from elsewhere is a crash, not an OOM.
	c := newAttempt(t)
	s = c.spec("kill -KILL $$")
	s.Limits = limit
	if st = start(t, r, s).Wait(); st.OOMKilled || st.Signal != "killed" {
		t.Fatalf("plain SIGKILL: status %+v", st)
	}
}

func TestCPULimitSetsTheQuota(t *testing.T) {
	r := cgroupRunner(t)
	a := newAttempt(t)
	s := a.spec("echo ready; exec sleep 300")
	s.Limits = Limits{CPUMillis: 250}
	p := start(t, r, s)
	testkit.Eventually(t, "the task to start", 30*time.Second, func() bool {
		lines, _ := ReadLog(a.log)
		return containsMsg(lines, Stdout, "ready")
	})
	var quota string
	if r.cg.v2 != "" {
		b, err := os.ReadFile(filepath.Join(r.cg.v2, cgroupName(a.dir), "cpu.max"))
		if err != nil {
			t.Fatal(err)
		}
		quota = strings.TrimSpace(string(b))
		if quota != "25000 100000" {
			t.Errorf("cpu.max %q, want 25000 100000", quota)
		}
	} else {
		b, err := os.ReadFile(filepath.Join(r.cg.v1["cpu"], cgroupName(a.dir), "cpu.cfs_quota_us"))
		if err != nil {
			t.Fatal(err)
		}
		if quota = strings.TrimSpace(string(b)); quota != "25000" {
			t.Errorf("cfs_quota_us %q, want 25000 (250m of a 100000us period)", quota)
		}
	}
	p.Abort("test done")
	p.Wait()
}

func TestUnenforcedLimitsAreSaid(t *testing.T) {
	r := NewRunner(Config{CgroupRoot: "none"})
	a := newAttempt(t)
	s := a.spec("exit 0")
	s.Limits = Limits{MemoryBytes: 200 << 20, CPUMillis: 500}
	p := start(t, r, s)
	p.Wait()
	if !strings.Contains(p.Unenforced(), "memory 200Mi, cpu 500m") {
		t.Errorf("Unenforced() = %q", p.Unenforced())
	}
	lines, _ := ReadLog(a.log)
	if len(lines) == 0 || !strings.Contains(lines[0].Message, "are not enforced") {
		t.Errorf("the log's first line does not say the limits are not enforced: %q", messages(lines, System))
	}
}

func TestLimitsOf(t *testing.T) {
	entry := func(n core.Resources_ResourceName, v string) *core.Resources_ResourceEntry {
		return &core.Resources_ResourceEntry{Name: n, Value: v}
	}
	cases := []struct {
		res  *core.Resources
		want Limits
		bad  string
	}{
		{nil, Limits{}, ""},
		{&core.Resources{Requests: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "200Mi"), entry(core.Resources_CPU, "500m")}},
			Limits{MemoryBytes: 200 << 20, CPUMillis: 500}, ""},
		{&core.Resources{Requests: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "1Gi")},
			Limits: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "2G"), entry(core.Resources_CPU, "1.5")}},
			Limits{MemoryBytes: 2e9, CPUMillis: 1500}, ""},
		{&core.Resources{Limits: []*core.Resources_ResourceEntry{entry(core.Resources_CPU, "2"), entry(core.Resources_GPU, "1")}},
			Limits{CPUMillis: 2000}, ""},
		{&core.Resources{Limits: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "1e3")}}, Limits{MemoryBytes: 1000}, ""},
		{&core.Resources{Limits: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "lots")}}, Limits{}, "memory"},
		{&core.Resources{Limits: []*core.Resources_ResourceEntry{entry(core.Resources_CPU, "-1")}}, Limits{}, "cpu"},
		{&core.Resources{Limits: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "1/2")}}, Limits{}, "memory"},
	}
	for _, tc := range cases {
		got, err := LimitsOf(tc.res)
		switch {
		case tc.bad != "":
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%v: err %v, want InvalidArgument naming %s", tc.res, err, tc.bad)
			}
		case err != nil || got != tc.want:
			t.Errorf("%v: %+v, %v; want %+v", tc.res, got, err, tc.want)
		}
	}
	if FormatBytes(200<<20) != "200Mi" || FormatBytes(1500) != "1500" {
		t.Errorf("FormatBytes: %s %s", FormatBytes(200<<20), FormatBytes(1500))
	}
}

// A restarted manager empties and removes the cgroup of an attempt it did
// not start, detached processes included.
func TestKillCgroupOfALostAttempt(t *testing.T) {
	r := cgroupRunner(t)
	a := newAttempt(t)
	p := start(t, r, a.spec(detachScript+"exec sleep 300"))
	base := filepath.Dir(a.dir)
	pids := []int{readPid(t, filepath.Join(base, "setsid.pid")), readPid(t, filepath.Join(base, "double.pid")), p.Identity().PID}

	// Another Runner, as a restarted manager has.
	n, err := NewRunner(Config{}).KillCgroup(a.dir)
	// At least these three; a shell of the double fork may not have
	// exited yet.
	if err != nil || n < 3 {
		t.Fatalf("KillCgroup = %d, %v; want the 3 processes", n, err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d survived", pid)
		}
	}
	if st := p.Wait(); st.Signal != "killed" {
		t.Errorf("status %+v", st)
	}
	assertCgroupRemoved(t, r, a.dir)
}

// The reaper leaves alone the children it did not adopt: a command the
// manager runs itself keeps its exit status for its own Wait, even when a
// reaping pass runs while it is a zombie.
func TestReaperLeavesOtherChildrenAlone(t *testing.T) {
	if err := EnableSubreaper(); err != nil {
		t.Fatalf("subreaper: %v", err)
	}
	for _, setpgid := range []bool{false, true} {
		cmd := exec.Command("sh", "-c", "exit 7")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: setpgid}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		testkit.Eventually(t, "the command to exit", patience, func() bool {
			st, err := readStat(pid)
			return err != nil || st.zombie() // gone: someone reaped it
		})
		reapOrphans()
		if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
			t.Errorf("setpgid %t: Wait = %v, want exit status 7", setpgid, err)
		}
	}
}

// An attempt of a leased user in a cgroup cannot leave it, so its end
// kills everything it left there, detached or not, without looking
// through every process on the host for its group and its directory: only
// untrack's pass for zombies of its group is left. An attempt of the
// manager's own user could have moved out of its cgroup, and is looked
// for everywhere as before.
func TestContainedAttemptEndsWithoutScanningTheHost(t *testing.T) {
	runAsRoot(t)
	if err := EnableSubreaper(); err != nil {
		t.Fatalf("subreaper: %v", err)
	}
	r := NewRunner(Config{KillGrace: 30 * time.Second})
	if !r.Cgroups() {
		t.Skipf("no cgroups here: %s", r.Containment())
	}
	// The detached processes write their pids into the attempt's own
	// directory (the leased user may write nowhere else).
	detach := strings.ReplaceAll(detachScript, "../", "") + "while [ ! -e release ]; do sleep 0.01; done\n"
	for _, tc := range []struct {
		name      string
		user      bool
		leftovers bool
		contained bool
	}{
		{"leased user, leftovers", true, true, true},
		{"leased user, nothing left", true, false, true},
		{"manager's user, leftovers", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := taskAttempt(t)
			script := "while [ ! -e release ]; do sleep 0.01; done\n"
			if tc.leftovers {
				script = detach
			}
			spec := a.spec(script)
			if tc.user {
				spec.User = testUser
			}
			p := start(t, r, spec)
			var pids []int
			if tc.leftovers {
				pids = []int{readPid(t, filepath.Join(a.dir, "setsid.pid")), readPid(t, filepath.Join(a.dir, "double.pid"))}
			}
			scans := procScans.Load()
			if err := os.WriteFile(filepath.Join(a.dir, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if st := p.Wait(); st.Code != 0 || st.Signal != "" {
				t.Fatalf("status %+v:\n%s", st, logText(t, a.log))
			}
			scans = procScans.Load() - scans
			if p.Contained() != tc.contained {
				t.Errorf("Contained() = %v, want %v", p.Contained(), tc.contained)
			}
			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("pid %d survived the end of the attempt", pid)
				}
				testkit.Eventually(t, "pid "+strconv.Itoa(pid)+" reaped", patience, func() bool {
					_, err := os.Stat("/proc/" + strconv.Itoa(pid))
					return os.IsNotExist(err)
				})
			}
			if lines, _ := ReadLog(a.log); tc.leftovers && !containsMsg(lines, System, "killed 2 process(es) the attempt left running") {
				t.Errorf("log does not say the 2 leftovers were killed:\n%s", strings.Join(messages(lines, System), "\n"))
			}
			assertCgroupRemoved(t, r, a.dir)
			// Nothing left: untrack finds no zombie of the group in one pass.
			if !tc.leftovers && scans != 1 {
				t.Errorf("the end of a contained attempt looked through every process %d times, want 1", scans)
			}
		})
	}
}
