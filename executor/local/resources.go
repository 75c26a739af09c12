package local

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

// The host's resources (executor.local.resources): what the host offers,
// detected at start unless configured, and the share running attempts hold.
// Planning refuses or parks an attempt that asks for more than the host
// offers at all (attempt.HostResources); the pool below starts one only
// when its requests fit beside those of the running attempts, and hands it
// its own GPUs. Attempts that request nothing always fit, so tasks without
// resources (the SDK sends none by default) run as before, bounded by
// maxParallelism only.

// cudaDevices is the variable that tells the CUDA runtime which GPUs an
// attempt may use.
const cudaDevices = "CUDA_VISIBLE_DEVICES"

// detectHost is what the host offers, from cfg's overrides or detected;
// notes say what could not be detected (the driver logs them).
func detectHost(cfg config.LocalResources) (h attempt.Host, notes []string) {
	h.CPUMillis = int64(runtime.NumCPU()) * 1000
	if q, err := resource.ParseQuantity(cfg.CPUs); err == nil && cfg.CPUs != "" {
		h.CPUMillis = q.MilliValue()
	}
	if q, err := resource.ParseQuantity(cfg.Memory); err == nil && cfg.Memory != "" {
		h.MemoryBytes = q.Value()
	} else if m, err := memTotal(); err == nil {
		h.MemoryBytes = m
	} else {
		h.MemoryBytes = math.MaxInt64
		notes = append(notes, "the host's memory is unknown ("+err.Error()+"): memory requests are not checked; set executor.local.resources.memory")
	}
	gpus := nvidiaGPUs()
	switch n := cfg.GPUs; {
	case n < 0:
	case n <= len(gpus):
		gpus = gpus[:n]
	default:
		for i := len(gpus); i < n; i++ {
			gpus = append(gpus, attempt.GPU{ID: strconv.Itoa(i)})
		}
	}
	h.GPUs = gpus
	return h, notes
}

// memTotal reads MemTotal from /proc/meminfo.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, os.ErrNotExist
}

// nvidiaGPUs lists the host's NVIDIA GPUs by UUID (which CUDA_VISIBLE_DEVICES
// accepts, whatever order the CUDA runtime numbers devices in): from the
// driver's /proc/driver/nvidia/gpus/*/information, else nvidia-smi -L.
func nvidiaGPUs() []attempt.GPU {
	var out []attempt.GPU
	infos, _ := filepath.Glob("/proc/driver/nvidia/gpus/*/information")
	for _, path := range infos {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var g attempt.GPU
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch strings.TrimSpace(k) {
			case "Model":
				g.Name = strings.TrimSpace(v)
			case "GPU UUID":
				g.ID = strings.TrimSpace(v)
			}
		}
		if g.ID != "" {
			out = append(out, g)
		}
	}
	if len(out) > 0 {
		return out
	}
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, smi, "-L").Output()
	if err != nil {
		return nil
	}
	return parseSMIList(b)
}

// parseSMIList reads nvidia-smi -L: "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-…)".
func parseSMIList(b []byte) []attempt.GPU {
	var out []attempt.GPU
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "GPU ") {
			continue
		}
		_, rest, ok := strings.Cut(line, ": ")
		name, uuid, ok2 := strings.Cut(rest, " (UUID: ")
		if !ok || !ok2 {
			continue
		}
		out = append(out, attempt.GPU{ID: strings.TrimSuffix(uuid, ")"), Name: strings.TrimSpace(name)})
	}
	return out
}

// resourcePool holds the share of the host running attempts use.
type resourcePool struct {
	host attempt.Host

	mu      sync.Mutex
	use     attempt.Use
	held    map[store.ActionKey]*resourceHold
	waiting map[store.ActionKey]bool
}

type resourceHold struct {
	req  attempt.Request
	gpus []attempt.GPU
	// cpuLent: the attempt is a parent one of whose children wants to
	// run; its CPU stops counting (a parent mostly waits for its children,
	// and counting it could leave a child nowhere to run). Its memory and
	// devices stay its own: the process holds them while it waits.
	cpuLent bool
}

func newResourcePool(h attempt.Host) *resourcePool {
	return &resourcePool{host: h, use: attempt.Use{GPUs: map[string]bool{}},
		held: map[store.ActionKey]*resourceHold{}, waiting: map[store.ActionKey]bool{}}
}

// acquire takes what req needs for key, a child of parent ("" for a root):
// the GPUs it is handed, or, when it must wait, what is busy (key is then
// woken by a later release).
func (p *resourcePool) acquire(key store.ActionKey, parent string, req attempt.Request) (gpus []attempt.GPU, busy string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.held[key]; h != nil {
		return h.gpus, ""
	}
	if parent != "" {
		if h := p.held[key.RunKey.Action(parent)]; h != nil && !h.cpuLent {
			h.cpuLent = true
			p.use.CPUMillis -= h.req.CPUMillis
		}
	}
	gpus, busy = p.host.Take(req, p.use)
	if busy != "" {
		p.waiting[key] = true
		return nil, busy
	}
	delete(p.waiting, key)
	p.use.CPUMillis += req.CPUMillis
	p.use.MemoryBytes += req.MemoryBytes
	for _, g := range gpus {
		p.use.GPUs[g.ID] = true
	}
	p.held[key] = &resourceHold{req: req, gpus: gpus}
	return gpus, ""
}

// release gives key's share back and returns the attempts that waited for
// one, to be planned again (those that still do not fit wait again).
func (p *resourcePool) release(key store.ActionKey) []store.ActionKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.held[key]
	if h == nil {
		return nil
	}
	delete(p.held, key)
	if !h.cpuLent {
		p.use.CPUMillis -= h.req.CPUMillis
	}
	p.use.MemoryBytes -= h.req.MemoryBytes
	for _, g := range h.gpus {
		delete(p.use.GPUs, g.ID)
	}
	if h.req.Zero() || len(p.waiting) == 0 {
		return nil
	}
	wake := make([]store.ActionKey, 0, len(p.waiting))
	for k := range p.waiting {
		wake = append(wake, k)
	}
	clear(p.waiting)
	slices.SortFunc(wake, func(a, b store.ActionKey) int { return strings.Compare(a.String(), b.String()) })
	return wake
}

// dropAllWaiting forgets the waiting attempts (the driver went on standby).
func (p *resourcePool) dropAllWaiting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.waiting)
}

// cudaEnv is the CUDA_VISIBLE_DEVICES value for gpus.
func cudaEnv(gpus []attempt.GPU) string {
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = g.ID
	}
	return strings.Join(ids, ",")
}
