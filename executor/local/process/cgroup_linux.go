package process

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// One cgroup per attempt holds every process the attempt starts, however it
// detaches (setsid, double fork), so the attempt's end can kill all of them,
// and it carries the task's resource limits. Two layouts are supported:
//
//   - cgroup v2 (a unified hierarchy mounted at /sys/fs/cgroup): the attempt
//     cgroups live below the manager's own cgroup, in <own>/flyte-manager/,
//     and the process is forked straight into its cgroup (clone3 with
//     CLONE_INTO_CGROUP), so not even its first instruction runs outside.
//     Limits need the memory and cpu controllers delegated to that subtree;
//     without them the cgroup still contains and kills.
//   - cgroup v1 (one hierarchy per controller, as on hosts with a hybrid
//     layout): memory, cpu and pids cgroups below the manager's own cgroup
//     in each, <ctrl><own>/flyte-manager/<attempt>. v1 cannot fork into a
//     cgroup, so the thread that forks (locked to its goroutine) joins the
//     attempt's cgroups first, the child inherits them, and the thread goes
//     back right after the fork.
//
// Nesting below the manager's own cgroup keeps tasks inside whatever limits
// the host put on the manager.

const (
	cgroupRoot   = "/sys/fs/cgroup"
	cgroupParent = "flyte-manager"
	cpuPeriodUS  = 100000
)

// v1Controllers are the v1 hierarchies an attempt joins: memory for its
// memory limit and OOM accounting, cpu for its CPU quota, pids so that its
// processes are listed somewhere even without the other two.
var v1Controllers = []string{"memory", "cpu", "pids"}

// Limits are the resources an attempt may use; zero means no limit.
type Limits struct {
	MemoryBytes int64
	CPUMillis   int64
}

func (l Limits) any() bool { return l.MemoryBytes > 0 || l.CPUMillis > 0 }

func (l Limits) String() string {
	var parts []string
	if l.MemoryBytes > 0 {
		parts = append(parts, "memory "+FormatBytes(l.MemoryBytes))
	}
	if l.CPUMillis > 0 {
		parts = append(parts, "cpu "+formatMillis(l.CPUMillis))
	}
	return strings.Join(parts, ", ")
}

// cgroupHost is what this host allows: where attempt cgroups go and which
// limits they can carry. A zero dir (v2) and no v1 dirs means none at all.
type cgroupHost struct {
	v2     string            // v2: the parent of attempt cgroups
	v1     map[string]string // v1: controller → parent of attempt cgroups
	v1Own  map[string]string // v1: controller → the manager's own cgroup
	memory bool
	cpu    bool
	why    string // what is missing, for the log
}

func (h *cgroupHost) ok() bool { return h.v2 != "" || len(h.v1) > 0 }

// Describe says in a sentence what containment the host gives attempts.
func (h *cgroupHost) Describe() string {
	switch {
	case h.v2 != "":
		return fmt.Sprintf("cgroup v2 under %s (memory limits: %t, cpu limits: %t)%s", h.v2, h.memory, h.cpu, suffix(h.why))
	case len(h.v1) > 0:
		return fmt.Sprintf("cgroup v1 under %s (memory limits: %t, cpu limits: %t)%s", filepath.Join(cgroupRoot, "<controller>", "…", cgroupParent), h.memory, h.cpu, suffix(h.why))
	}
	return "no cgroup (" + h.why + "): attempts are contained by process tree and working directory only, resource limits are not enforced"
}

func suffix(why string) string {
	if why == "" {
		return ""
	}
	return "; " + why
}

// probeCgroups finds out, once, what the host allows; it creates the
// flyte-manager parent cgroups it will use.
func probeCgroups(root string) *cgroupHost {
	own, err := ownCgroups()
	if err != nil {
		return &cgroupHost{why: "cannot read /proc/self/cgroup: " + err.Error()}
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return probeV2(root, own[""])
	}
	return probeV1(root, own)
}

func probeV2(mount, own string) *cgroupHost {
	h := &cgroupHost{}
	parent := filepath.Join(mount, own, cgroupParent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		h.why = "cannot create " + parent + ": " + err.Error()
		return h
	}
	h.v2 = parent
	// Controllers must be enabled on every level down to the attempts'
	// parent. Enabling them in the manager's own cgroup fails while the
	// manager itself lives there (unless it is the root): then the
	// cgroups contain but do not limit.
	avail := readWords(filepath.Join(mount, own, "cgroup.controllers"))
	var want []string
	for _, c := range []string{"memory", "cpu", "pids"} {
		if avail[c] {
			want = append(want, "+"+c)
		}
	}
	if len(want) > 0 {
		ctl := strings.Join(want, " ")
		err1 := os.WriteFile(filepath.Join(mount, own, "cgroup.subtree_control"), []byte(ctl), 0)
		err2 := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(ctl), 0)
		if err := errors.Join(err1, err2); err != nil {
			h.why = "controllers not delegated: " + err.Error()
		}
	}
	enabled := readWords(filepath.Join(parent, "cgroup.subtree_control"))
	h.memory, h.cpu = enabled["memory"], enabled["cpu"]
	if !h.memory && !h.cpu && h.why == "" {
		h.why = "the memory and cpu controllers are not available to " + parent
	}
	return h
}

func probeV1(root string, own map[string]string) *cgroupHost {
	h := &cgroupHost{v1: map[string]string{}, v1Own: map[string]string{}}
	var missing []string
	for _, c := range v1Controllers {
		mount := filepath.Join(root, c)
		path, ok := own[c]
		if !ok {
			missing = append(missing, c+" (not mounted)")
			continue
		}
		parent := filepath.Join(mount, path, cgroupParent)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			missing = append(missing, c+" ("+err.Error()+")")
			continue
		}
		h.v1[c] = parent
		h.v1Own[c] = filepath.Join(mount, path)
	}
	h.memory = h.v1["memory"] != ""
	h.cpu = h.v1["cpu"] != ""
	if len(missing) > 0 {
		h.why = "unavailable v1 controllers: " + strings.Join(missing, ", ")
	}
	if len(h.v1) == 0 {
		h.v1, h.v1Own = nil, nil
	}
	return h
}

// ownCgroups reads /proc/self/cgroup: controller → path, "" for v2.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-id:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

func readWords(path string) map[string]bool {
	b, _ := os.ReadFile(path)
	out := map[string]bool{}
	for _, w := range strings.Fields(string(b)) {
		out[w] = true
	}
	return out
}

// cgroup is one attempt's cgroup (one directory per v1 controller).
type cgroup struct {
	v2   bool
	dirs map[string]string // controller ("" for v2) → directory
	own  map[string]string // v1: where the forking thread goes back to
	fd   int               // v2: the open directory, for CLONE_INTO_CGROUP
}

// cgroupName names an attempt's cgroup after its working directory, which
// is unique among the attempts of every manager on the host.
func cgroupName(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "attempt-" + hex.EncodeToString(sum[:12])
}

// newCgroup creates the attempt's cgroup with its limits. A cgroup of the
// same name left by a manager that died is emptied and made anew.
func (h *cgroupHost) newCgroup(name string, lim Limits) (*cgroup, error) {
	cg := h.cgroupOf(name)
	if _, err := cg.kill(5 * time.Second); err != nil {
		return nil, err
	}
	_ = cg.removeDirs()
	for _, d := range cg.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			_ = cg.removeDirs()
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
	}
	if err := cg.setLimits(h, lim); err != nil {
		_ = cg.removeDirs()
		return nil, err
	}
	if cg.v2 {
		fd, err := syscall.Open(cg.dirs[""], syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			_ = cg.removeDirs()
			return nil, fmt.Errorf("open cgroup %s: %w", cg.dirs[""], err)
		}
		cg.fd = fd
	}
	return cg, nil
}

// cgroupOf names the cgroup called name, without creating it.
func (h *cgroupHost) cgroupOf(name string) *cgroup {
	cg := &cgroup{v2: h.v2 != "", dirs: map[string]string{}, own: h.v1Own, fd: -1}
	if cg.v2 {
		cg.dirs[""] = filepath.Join(h.v2, name)
	} else {
		for c, parent := range h.v1 {
			cg.dirs[c] = filepath.Join(parent, name)
		}
	}
	return cg
}

func (cg *cgroup) setLimits(h *cgroupHost, lim Limits) error {
	write := func(ctrl, file, value string) error {
		d, ok := cg.dirs[ctrl]
		if !ok {
			return nil
		}
		if err := os.WriteFile(filepath.Join(d, file), []byte(value), 0); err != nil {
			return fmt.Errorf("set %s of cgroup %s: %w", file, d, err)
		}
		return nil
	}
	mem, cpu := strconv.FormatInt(lim.MemoryBytes, 10), strconv.FormatInt(lim.CPUMillis*cpuPeriodUS/1000, 10)
	var err error
	switch {
	case cg.v2:
		if lim.MemoryBytes > 0 && h.memory {
			// No swap either: the limit is on what the task holds.
			err = errors.Join(write("", "memory.max", mem), optional(write("", "memory.swap.max", "0")))
		}
		if lim.CPUMillis > 0 && h.cpu {
			err = errors.Join(err, write("", "cpu.max", cpu+" "+strconv.Itoa(cpuPeriodUS)))
		}
	default:
		if lim.MemoryBytes > 0 && h.memory {
			err = write("memory", "memory.limit_in_bytes", mem)
			// memsw exists only with swap accounting; it must not be
			// below limit_in_bytes, so it is written second.
			err = errors.Join(err, optional(write("memory", "memory.memsw.limit_in_bytes", mem)))
		}
		if lim.CPUMillis > 0 && h.cpu {
			err = errors.Join(err, write("cpu", "cpu.cfs_period_us", strconv.Itoa(cpuPeriodUS)), write("cpu", "cpu.cfs_quota_us", cpu))
		}
	}
	return err
}

// optional ignores the absence of a file that only some kernels have.
func optional(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) {
		return nil
	}
	return err
}

// enterThread moves the calling OS thread into the v1 cgroups so the
// child it forks next starts there; leaveThread moves it back. The caller
// holds its OS thread locked across both.
func (cg *cgroup) enterThread() error {
	if cg == nil || cg.v2 {
		return nil
	}
	tid := []byte(strconv.Itoa(syscall.Gettid()))
	for c, d := range cg.dirs {
		if err := os.WriteFile(filepath.Join(d, "tasks"), tid, 0); err != nil {
			cg.leaveThread()
			return fmt.Errorf("join %s cgroup %s: %w", c, d, err)
		}
	}
	return nil
}

func (cg *cgroup) leaveThread() {
	if cg == nil || cg.v2 {
		return
	}
	tid := []byte(strconv.Itoa(syscall.Gettid()))
	for c := range cg.dirs {
		_ = os.WriteFile(filepath.Join(cg.own[c], "tasks"), tid, 0)
	}
}

// procs lists the processes in the cgroup (zombies have left it).
func (cg *cgroup) procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range cg.dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// kill SIGKILLs everything in the cgroup until it is empty, or fails once
// d passed. It reports how many processes it found. A process forking
// while it is killed is caught by the next round: its children are in the
// cgroup too.
func (cg *cgroup) kill(d time.Duration) (int, error) {
	found := map[int]bool{}
	if cg.v2 {
		for _, pid := range cg.procs() {
			found[pid] = true
		}
		// cgroup.kill (Linux 5.14) kills the whole subtree at once,
		// racing no fork.
		_ = os.WriteFile(filepath.Join(cg.dirs[""], "cgroup.kill"), []byte("1"), 0)
	}
	deadline := time.Now().Add(d)
	for {
		procs := cg.procs()
		if len(procs) == 0 {
			return len(found), nil
		}
		for _, pid := range procs {
			found[pid] = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return len(found), fmt.Errorf("%d process(es) survived SIGKILL in cgroup %s", len(procs), cg.describe())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// oomKills is how many processes the kernel killed for going over the
// memory limit: oom_kill in memory.oom_control (v1, Linux 4.13) or
// memory.events (v2). An ordinary SIGKILL does not count here.
func (cg *cgroup) oomKills() int64 {
	var path string
	if cg.v2 {
		path = filepath.Join(cg.dirs[""], "memory.events")
	} else if d, ok := cg.dirs["memory"]; ok {
		path = filepath.Join(d, "memory.oom_control")
	} else {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove deletes the cgroup once it is empty.
func (cg *cgroup) remove() error {
	if cg.fd >= 0 {
		_ = syscall.Close(cg.fd)
		cg.fd = -1
	}
	// An emptied cgroup can stay busy for a moment while the kernel
	// finishes tearing its last tasks down.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := cg.removeDirs()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (cg *cgroup) removeDirs() error {
	var errsOut []error
	for _, d := range cg.dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errsOut = append(errsOut, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errsOut...)
}

func (cg *cgroup) describe() string {
	for _, d := range cg.dirs {
		return filepath.Base(d)
	}
	return "?"
}

// FormatBytes writes a byte count the way Kubernetes quantities do when it
// is a whole number of a binary unit (200Mi), else in bytes.
func FormatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func formatMillis(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}
