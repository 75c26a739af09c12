package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/local/images"
	"fmgr.dev/executor/local/images/imagetest"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// rawSpec is a raw container task (ContainerTask) running script with sh
// in image, returning the string output "report" from outDir.
func rawSpec(name, image, script, inDir, outDir string) *task.TaskSpec {
	str := &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_STRING}}
	return &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "development", Name: "t." + name, Version: "v1"},
		Type:     "raw-container",
		Metadata: &core.TaskMetadata{},
		Interface: &core.TypedInterface{Outputs: &core.VariableMap{Variables: []*core.VariableEntry{
			{Key: "report", Value: &core.Variable{Type: str}}}}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: image,
			Args:  []string{"sh", "-c", script},
			DataConfig: &core.DataLoadingConfig{Enabled: true, InputPath: inDir, OutputPath: outDir,
				Format: core.DataLoadingConfig_JSON},
		}},
	}}
}

// report is the "report" output of key's succeeded attempt.
func (h *harness) report(key store.ActionKey) string {
	h.t.Helper()
	atts := h.attempts(key)
	b, err := os.ReadFile(filepath.Join(atts[len(atts)-1].OutputURI, runlayout.OutputsFile))
	if err != nil {
		h.t.Fatal(err)
	}
	var outs task.Outputs
	if err := proto.Unmarshal(b, &outs); err != nil {
		h.t.Fatal(err)
	}
	return outs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetStringValue()
}

// containerProbe writes what the container sees into $OUT/report, one
// "key=value" a line.
const containerProbe = `{
echo "uid=$(id -u)"
echo "capeff=$(grep CapEff /proc/self/status | awk '{print $2}')"
echo "pid1=$(cat /proc/1/cmdline | tr '\0' ' ')"
echo "ifaces=$(tail -n +3 /proc/net/dev | awk '{printf "%s", $1}')"
echo "hostfile=$(cat HOSTFILE 2>&1 | head -1)"
echo "nnp=$(grep NoNewPrivs /proc/self/status | awk '{print $2}')"
} > OUT/report`

// A raw container runs in runc with its image: an unprivileged user, no
// capabilities, its own pid namespace, loopback only, none of the host's
// files; its output is collected and the task-chosen data directories are
// made inside the container only.
func TestRawContainerRunsInRunc(t *testing.T) {
	// The manager's umask (internal/config): what it makes for the
	// container must still be usable by the container's user.
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	h := newHarness(t, "sqlite://"+t.TempDir()+"/manager.db")
	withBusybox(t, h)
	hostFile := filepath.Join(h.shared, "host-marker")
	writeFile(t, hostFile, "the host's file", 0o644)
	// Paths the task chose, absent on the host: they must stay absent.
	inDir, outDir := "/fm-test-"+t.Name()+"/in", "/fm-test-"+t.Name()+"/out"
	script := strings.NewReplacer("OUT", outDir, "HOSTFILE", hostFile).Replace(containerProbe)
	key := h.runSpec("probe", rawSpec("probe", imagetest.BusyboxRef, script, inDir, outDir))
	a := h.terminal(key, phase.Succeeded, 2*time.Minute)
	if a == nil {
		return
	}
	got := map[string]string{}
	for _, l := range strings.Split(h.report(key), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	// The container runs as the attempt's leased user (executor.local.runAs,
	// a range by default), never root.
	if uid, err := strconv.ParseUint(got["uid"], 10, 32); err != nil || uid < config.DefaultRunAsFirstUID || uid >= config.DefaultRunAsFirstUID+config.DefaultRunAsCount {
		t.Errorf("uid = %q in the container, want one of the attempts' range from %d (report %v)", got["uid"], config.DefaultRunAsFirstUID, got)
	}
	for k, want := range map[string]string{"capeff": "0000000000000000", "ifaces": "lo:", "nnp": "1"} {
		if got[k] != want {
			t.Errorf("%s = %q in the container, want %q (report %v)", k, got[k], want, got)
		}
	}
	if !strings.HasPrefix(got["pid1"], "sh -c") {
		t.Errorf("pid 1 in the container is %q, not its own command", got["pid1"])
	}
	if strings.Contains(got["hostfile"], "the host's file") {
		t.Errorf("the container read the host's file %s", hostFile)
	}
	if _, err := os.Stat(filepath.Dir(inDir)); err == nil {
		t.Errorf("the task-chosen path %s was created on the host", filepath.Dir(inDir))
		_ = os.RemoveAll(filepath.Dir(inDir))
	}

	// An image the store lacks fails the launch, saying how to load it.
	missing := h.runSpec("missing", rawSpec("missing", "alpine:3", "true", "/var/inputs", "/var/outputs"))
	a = h.terminal(missing, phase.Failed, time.Minute)
	if e := execErr(a.ErrorInfo); !strings.Contains(e.GetMessage(), "flyte-manager image load") {
		t.Errorf("an image the store lacks: error %v", e)
	}
}

// withBusybox starts h's driver with the runc runtime and an image store
// holding the busybox image.
func withBusybox(t *testing.T, h *harness, tune ...func(*config.LocalExecutor)) *Driver {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runc needs root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("needs runc (apt-get install runc)")
	}
	imgDir := filepath.Join(t.TempDir(), "images")
	st, err := images.Open(imgDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(imagetest.BusyboxLayout(t), ""); err != nil {
		t.Fatal(err)
	}
	return h.driver(append([]func(*config.LocalExecutor){func(c *config.LocalExecutor) {
		c.Containers = config.LocalContainers{Runtime: config.ContainerRuntimeRunc, Images: imgDir}
	}}, tune...)...)
}

// processesWith lists the host's processes whose command line has token.
func processesWith(token string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if cmd := strings.ReplaceAll(string(b), "\x00", " "); err == nil && strings.Contains(cmd, token) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

// An aborted container is gone when the abort is recorded, though its
// pid 1 ignores SIGTERM (as a shell as pid 1 does) and runc is killed.
func TestAbortedContainerIsGone(t *testing.T) {
	h := newHarness(t, "sqlite://"+t.TempDir()+"/manager.db")
	withBusybox(t, h)
	token := "31" + strconv.Itoa(os.Getpid()%10000)
	key := h.runSpec("sleeper", rawSpec("sleeper", imagetest.BusyboxRef,
		"touch /var/outputs/started; sleep "+token+"; echo late > /var/outputs/report", "/var/inputs", "/var/outputs"))
	h.wait(key, "RUNNING", time.Minute, func(a *store.Action) bool { return a.Phase == phase.Running })
	testkit.Eventually(t, "the container's sleep", time.Minute, func() bool { return len(processesWith("sleep "+token)) > 0 })
	if err := h.state.Abort(h.ctx, key, "stop", "test"); err != nil {
		t.Fatal(err)
	}
	h.terminal(key, phase.Aborted, time.Minute)
	if left := processesWith("sleep " + token); len(left) > 0 {
		t.Errorf("the aborted container still runs: %v", left)
	}
	// runc was killed after the grace: the container is deleted (its
	// state and cgroups) all the same.
	if entries, err := os.ReadDir(filepath.Join(filepath.Dir(h.logPath(key, 1)), runcState)); err == nil && len(entries) > 0 {
		t.Errorf("runc still knows the aborted container: %v", entries)
	}
}

// runtime: host (unsafe, explicit) runs the command on the host, with the
// data directories bound over existing host directories in a private
// mount namespace: the host's directories stay as they were. It never
// creates a data directory the task chose on the host.
func TestRawContainersOnHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a private mount namespace needs root")
	}
	h := newHarness(t, "sqlite://"+t.TempDir()+"/manager.db")
	h.driver(func(c *config.LocalExecutor) {
		c.Containers = config.LocalContainers{Runtime: config.ContainerRuntimeHost, Images: filepath.Join(t.TempDir(), "images")}
	})
	base := t.TempDir()
	in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{in, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := h.runSpec("onhost", rawSpec("onhost", "ignored:1", `echo "uid=$(id -u)" > `+out+`/report`, in, out))
	a := h.terminal(key, phase.Succeeded, time.Minute)
	if a == nil {
		return
	}
	if got := h.report(key); got != "uid=0" {
		t.Errorf("report %q, want the manager's uid 0", got)
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Errorf("the command wrote into the host's %s: %v", out, entries)
	}
	if b, _ := os.ReadFile(h.logPath(key, 1)); !strings.Contains(string(b), `the image "ignored:1" is not used`) {
		t.Errorf("the attempt's log does not say that the image was not used:\n%s", b)
	}

	chosen := filepath.Join(base, "absent")
	bad := h.runSpec("absent", rawSpec("absent", "ignored:1", "true", chosen+"/in", chosen+"/out"))
	a = h.terminal(bad, phase.Failed, time.Minute)
	if e := execErr(a.ErrorInfo); !strings.Contains(e.GetMessage(), "never creates a path a task chose") {
		t.Errorf("a missing data directory: error %v", e)
	}
	if _, err := os.Stat(chosen); err == nil {
		t.Errorf("the task-chosen path %s was created on the host", chosen)
	}
}

// Without a working runc the manager still starts, and a raw container
// task fails at launch saying how to fix it.
func TestRawContainerWithoutRuncFailsClearly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the message for a manager that is not root differs")
	}
	h := newHarness(t, "sqlite://"+t.TempDir()+"/manager.db")
	h.driver(func(c *config.LocalExecutor) {
		c.Containers = config.LocalContainers{Runtime: config.ContainerRuntimeRunc, Runc: "/nonexistent/runc",
			Images: filepath.Join(t.TempDir(), "images")}
	})
	key := h.runSpec("norunc", rawSpec("norunc", imagetest.BusyboxRef, "true", "/var/inputs", "/var/outputs"))
	a := h.terminal(key, phase.Failed, time.Minute)
	e := execErr(a.ErrorInfo)
	for _, want := range []string{"/nonexistent/runc was not found", "apt-get install runc", "runtime: host"} {
		if !strings.Contains(e.GetMessage(), want) {
			t.Errorf("error %q does not say %q", e.GetMessage(), want)
		}
	}
	// A Python task still runs.
	h.terminal(h.run("python", succeed, taskOpts{}), phase.Succeeded, time.Minute)
}

// A container outlives runc (it runs in a session of its own), as it does
// when the manager dies (runc dies with it): the restarted manager stops
// it before it records the orphaned attempt.
func TestRestartStopsAnOrphanedContainer(t *testing.T) {
	h := newHarness(t, "sqlite://"+t.TempDir()+"/manager.db")
	d1 := withBusybox(t, h)
	token := "32" + strconv.Itoa(os.Getpid()%10000)
	key := h.runSpec("orphan", rawSpec("orphan", imagetest.BusyboxRef, "sleep "+token, "/var/inputs", "/var/outputs"))
	h.wait(key, "RUNNING", time.Minute, func(a *store.Action) bool { return a.Phase == phase.Running })
	testkit.Eventually(t, "the container's sleep", time.Minute, func() bool { return len(processesWith("sleep "+token)) > 0 })

	d1.abandon()
	dir, _ := attemptDir(h.workDir, key, 1)
	rec, ok, err := readIdentity(dir)
	if !ok || err != nil {
		t.Fatalf("no process record: %v", err)
	}
	if err := syscall.Kill(rec.Identity.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "runc's death", time.Minute, func() bool { return !alive(rec.Identity.PID) })
	if len(processesWith("sleep "+token)) == 0 {
		t.Fatal("the container died with runc: the test simulates nothing")
	}

	withBusybox(t, h, func(c *config.LocalExecutor) { c.SystemRetries = 0 })
	a := h.terminal(key, phase.Failed, time.Minute)
	if e := execErr(a.ErrorInfo); !strings.Contains(e.GetMessage(), "its container was stopped") {
		t.Errorf("attempt 1: %v", e)
	}
	if left := processesWith("sleep " + token); len(left) > 0 {
		t.Errorf("the orphaned container survived the restart: %v", left)
	}
}
