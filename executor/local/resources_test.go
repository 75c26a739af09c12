package local

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

func requests(kv ...string) *core.Resources {
	names := map[string]core.Resources_ResourceName{"cpu": core.Resources_CPU, "memory": core.Resources_MEMORY, "gpu": core.Resources_GPU}
	r := &core.Resources{}
	for i := 0; i < len(kv); i += 2 {
		r.Requests = append(r.Requests, &core.Resources_ResourceEntry{Name: names[kv[i]], Value: kv[i+1]})
	}
	return r
}

func hostOf(r config.LocalResources) func(*config.LocalExecutor) {
	return func(c *config.LocalExecutor) { c.Resources = r }
}

// Requests decide who runs: the sum of the running attempts' requests fits
// the host (here 1 CPU and 1 GPU), an attempt gets its GPU to itself
// (CUDA_VISIBLE_DEVICES), and one that asks for nothing runs regardless.
func TestRequestsShareTheHost(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.driver(hostOf(config.LocalResources{Unsatisfiable: config.UnsatisfiableWait, CPUs: "1", GPUs: 1}))
		record := func(name string) string {
			return `echo "${CUDA_VISIBLE_DEVICES-unset}" > "$SHARED/` + name + `-cuda"; `
		}
		holder := h.run("rholder", record("holder")+`while [ ! -e "$SHARED/release" ]; do sleep 0.05; done; `+succeed,
			taskOpts{resources: requests("cpu", "1", "gpu", "1")})
		h.wait(holder, "RUNNING", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.Running })
		// The host's one CPU is taken: this one waits, saying for what.
		cpu := h.run("rcpu", record("cpu")+succeed, taskOpts{resources: requests("cpu", "500m")})
		h.wait(cpu, "WAITING_FOR_RESOURCES", 20*time.Second, func(a *store.Action) bool { return a.Phase == phase.WaitingForResources })
		// Nothing requested: it runs beside the holder, and sees no GPU.
		free := h.run("rfree", record("free")+succeed, taskOpts{})
		h.terminal(free, phase.Succeeded, 20*time.Second)
		if _, err := os.Stat(h.sharedFile("cpu-cuda")); err == nil {
			t.Error("the attempt waiting for a CPU ran")
		}
		if ev := h.eventReasons(cpu); !slices.ContainsFunc(ev, func(r string) bool { return strings.Contains(r, "waiting for 500m CPU (1 of 1 in use)") }) {
			t.Errorf("the waiting attempt's reasons %q do not say it waits for a CPU", ev)
		}

		writeFile(t, h.sharedFile("release"), "", 0o644)
		h.terminal(holder, phase.Succeeded, 20*time.Second)
		h.terminal(cpu, phase.Succeeded, 20*time.Second)
		for name, want := range map[string]string{"holder": "0", "free": "", "cpu": ""} {
			if got := strings.TrimSpace(h.readShared(name + "-cuda")); got != want {
				t.Errorf("%s ran with CUDA_VISIBLE_DEVICES=%q, want %q", name, got, want)
			}
		}
	})
}

// An attempt that asks for more than the host has: with "fail" it fails at
// once without running, naming what is missing; with "wait" it waits in
// WAITING_FOR_RESOURCES until its max_queued_time, then ends TIMED_OUT,
// naming it too.
func TestUnsatisfiableRequests(t *testing.T) {
	a100 := &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "nvidia-tesla-a100"}}
	eachDB(t, func(t *testing.T, h *harness) {
		d := h.driver(hostOf(config.LocalResources{Unsatisfiable: config.UnsatisfiableFail, CPUs: "2", Memory: "1Gi", GPUs: 0}))
		for _, c := range []struct {
			name string
			o    taskOpts
			want string
		}{
			{"rgpu", taskOpts{resources: requests("gpu", "1"), extended: a100}, "1 nvidia-tesla-a100 GPU (the host offers 0 nvidia-tesla-a100 GPUs)"},
			{"rmem", taskOpts{resources: requests("memory", "2Gi")}, "2Gi of memory (the host offers 1Gi)"},
			{"rcpus", taskOpts{resources: requests("cpu", "3"), retries: 2}, "3 CPU (the host offers 2)"},
		} {
			key := h.run(c.name, `touch "$SHARED/`+c.name+`-ran"; `+succeed, c.o)
			a := h.terminal(key, phase.Failed, 20*time.Second)
			e := execErr(a.ErrorInfo)
			if a.Attempts != 1 || e.GetKind() != core.ExecutionError_USER || e.GetCode() != attempt.CodeResourcesUnavailable || !strings.Contains(e.GetMessage(), c.want) {
				t.Errorf("%s: %d attempts, error %v; want one USER %s naming %q", c.name, a.Attempts, e, attempt.CodeResourcesUnavailable, c.want)
			}
			if _, err := os.Stat(h.sharedFile(c.name + "-ran")); err == nil {
				t.Errorf("%s ran", c.name)
			}
		}
		if err := d.Stop(h.ctx); err != nil {
			t.Fatal(err)
		}

		h.driver(hostOf(config.LocalResources{Unsatisfiable: config.UnsatisfiableWait, CPUs: "2", GPUs: 0}))
		key := h.run("rwait", `touch "$SHARED/rwait-ran"; `+succeed,
			taskOpts{resources: requests("gpu", "1"), extended: a100, queued: 2 * time.Second})
		a := h.terminal(key, phase.TimedOut, 30*time.Second)
		e := execErr(a.ErrorInfo)
		if e.GetCode() != machine.CodeQueuedTimeout || !strings.Contains(e.GetMessage(), "queued timeout of 2s") || !strings.Contains(e.GetMessage(), "nvidia-tesla-a100 GPU") {
			t.Errorf("error %v: want the queued timeout, naming the GPU it waited for", e)
		}
		if got := h.phases(key, 1); !slices.Contains(got, "WAITING_FOR_RESOURCES") {
			t.Errorf("phases %v: want WAITING_FOR_RESOURCES before the timeout", got)
		}
		if _, err := os.Stat(h.sharedFile("rwait-ran")); err == nil {
			t.Error("the waiting attempt ran")
		}
		if dirs, _ := filepath.Glob(filepath.Join(h.workDir, "_", "p", "development", "rwait", "*", "*")); len(dirs) > 0 {
			t.Errorf("attempt directories %v for an attempt that never started", dirs)
		}
	})
}

func TestParseSMIList(t *testing.T) {
	got := parseSMIList([]byte("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-11111111-2222)\nGPU 1: NVIDIA L4 (UUID: GPU-3333)\nnoise\n"))
	want := []attempt.GPU{{ID: "GPU-11111111-2222", Name: "NVIDIA A100-SXM4-40GB"}, {ID: "GPU-3333", Name: "NVIDIA L4"}}
	if !slices.Equal(got, want) {
		t.Errorf("parseSMIList = %+v, want %+v", got, want)
	}
}

// eventReasons are the reasons recorded with key's events.
func (h *harness) eventReasons(key store.ActionKey) []string {
	h.t.Helper()
	evs, err := h.st.Actions.Events(h.ctx, key)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return out
}
