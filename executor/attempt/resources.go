package attempt

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// What an attempt asks of a host and whether a host can give it: the pure
// part of the local executor's resource handling (the kubernetes executor
// leaves this to the cluster's scheduler). Requests, not limits, decide
// fit, as a scheduler decides it; a resource with a limit and no request
// requests its limit, as Kubernetes defaults it.

// Request is what an attempt needs of its host.
type Request struct {
	CPUMillis   int64
	MemoryBytes int64
	GPUs        int64
	// GPUDevice is the accelerator the task names ("nvidia-tesla-a100"),
	// "" for any; GPUClass its device class (NVIDIA unless it says).
	GPUDevice string
	GPUClass  core.GPUAccelerator_DeviceClass
}

// Zero says the attempt asks for nothing in particular.
func (r Request) Zero() bool { return r.CPUMillis == 0 && r.MemoryBytes == 0 && r.GPUs == 0 }

// GPU is one device a host offers.
type GPU struct {
	// ID names it to the CUDA runtime in CUDA_VISIBLE_DEVICES (an index or
	// a GPU-<uuid>).
	ID string
	// Name is its model as the driver reports it ("NVIDIA A100-SXM4-40GB");
	// "" matches any model.
	Name string
}

// Host is what a host offers its attempts in total.
type Host struct {
	CPUMillis   int64
	MemoryBytes int64
	// GPUs are NVIDIA devices.
	GPUs []GPU
}

// Use is what running attempts hold of a Host.
type Use struct {
	CPUMillis   int64
	MemoryBytes int64
	// GPUs holds the IDs of the devices in use.
	GPUs map[string]bool
}

// RequestOf reads the request of a task's container and its extended
// resources. A value that is not a quantity is an InvalidArgument error
// naming the resource.
func RequestOf(res *core.Resources, ext *core.ExtendedResources) (Request, error) {
	var r Request
	pick := func(name core.Resources_ResourceName) string {
		for _, list := range [][]*core.Resources_ResourceEntry{res.GetRequests(), res.GetLimits()} {
			for _, e := range list {
				if e.GetName() == name && strings.TrimSpace(e.GetValue()) != "" {
					return strings.TrimSpace(e.GetValue())
				}
			}
		}
		return ""
	}
	for _, f := range []struct {
		name core.Resources_ResourceName
		what string
		set  func(q resource.Quantity)
	}{
		{core.Resources_CPU, "cpu", func(q resource.Quantity) { r.CPUMillis = q.MilliValue() }},
		{core.Resources_MEMORY, "memory", func(q resource.Quantity) { r.MemoryBytes = q.Value() }},
		{core.Resources_GPU, "gpu", func(q resource.Quantity) { r.GPUs = q.Value() }},
	} {
		v := pick(f.name)
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return Request{}, errs.Invalidf("the task's %s resource %q is not a non-negative quantity such as 2, 500m or 4Gi", f.what, v)
		}
		f.set(q)
	}
	if acc := ext.GetGpuAccelerator(); acc != nil {
		r.GPUDevice, r.GPUClass = acc.GetDevice(), acc.GetDeviceClass()
	}
	return r, nil
}

// Missing says what h can never give r, even with nothing else running
// ("" when r fits an idle h): the words name the resource and both
// amounts, for the user.
func (h Host) Missing(r Request) string {
	var short []string
	if r.CPUMillis > h.CPUMillis {
		short = append(short, fmt.Sprintf("%s CPU (the host offers %s)", cpus(r.CPUMillis), cpus(h.CPUMillis)))
	}
	if r.MemoryBytes > h.MemoryBytes {
		short = append(short, fmt.Sprintf("%s of memory (the host offers %s)", bytes(r.MemoryBytes), bytes(h.MemoryBytes)))
	}
	if r.GPUs > 0 {
		if have := len(h.matching(r)); int64(have) < r.GPUs {
			short = append(short, fmt.Sprintf("%s (the host offers %s)", gpuWords(r, r.GPUs), gpuWords(r, int64(have))))
		}
	}
	return strings.Join(short, ", ")
}

// Take picks what r gets of h while u is in use: the GPUs it is handed, or,
// when it must wait, what is busy ("" and the devices when it fits).
func (h Host) Take(r Request, u Use) (gpus []GPU, busy string) {
	var short []string
	if r.CPUMillis > 0 && u.CPUMillis+r.CPUMillis > h.CPUMillis {
		short = append(short, fmt.Sprintf("%s CPU (%s of %s in use)", cpus(r.CPUMillis), cpus(u.CPUMillis), cpus(h.CPUMillis)))
	}
	if r.MemoryBytes > 0 && u.MemoryBytes+r.MemoryBytes > h.MemoryBytes {
		short = append(short, fmt.Sprintf("%s of memory (%s of %s in use)", bytes(r.MemoryBytes), bytes(u.MemoryBytes), bytes(h.MemoryBytes)))
	}
	if r.GPUs > 0 {
		match := h.matching(r)
		free := slices.DeleteFunc(slices.Clone(match), func(g GPU) bool { return u.GPUs[g.ID] })
		if int64(len(free)) < r.GPUs {
			short = append(short, fmt.Sprintf("%s (%d of %d in use)", gpuWords(r, r.GPUs), len(match)-len(free), len(match)))
		} else {
			gpus = free[:r.GPUs]
		}
	}
	if len(short) > 0 {
		return nil, "waiting for " + strings.Join(short, ", ")
	}
	return gpus, ""
}

// matching lists h's GPUs that can serve r: NVIDIA devices (the only ones
// a host is searched for), of the model r names if it names one.
func (h Host) matching(r Request) []GPU {
	if r.GPUClass != core.GPUAccelerator_NVIDIA_GPU {
		return nil
	}
	model := deviceModel(r.GPUDevice)
	var out []GPU
	for _, g := range h.GPUs {
		if model == "" || g.Name == "" || slices.Contains(words(g.Name), model) {
			out = append(out, g)
		}
	}
	return out
}

// deviceModel is the model word of an accelerator name as the SDK sends
// it: "nvidia-tesla-a100" → "a100", "nvidia-h100-80gb" → "h100", "A100" →
// "a100".
func deviceModel(device string) string {
	for _, w := range words(device) {
		if w != "nvidia" && w != "tesla" {
			return w
		}
	}
	return ""
}

// words splits a device name into lower-case words of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(c rune) bool {
		return (c < 'a' || c > 'z') && (c < '0' || c > '9')
	})
}

func gpuWords(r Request, n int64) string {
	kind := "GPU"
	switch {
	case r.GPUClass != core.GPUAccelerator_NVIDIA_GPU:
		kind = strings.ReplaceAll(r.GPUClass.String(), "_", " ") + " device"
	case r.GPUDevice != "":
		kind = r.GPUDevice + " GPU"
	}
	if n != 1 {
		kind += "s"
	}
	return fmt.Sprintf("%d %s", n, kind)
}

func cpus(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprint(milli / 1000)
	}
	return fmt.Sprintf("%dm", milli)
}

// bytes shows n in binary units, to one decimal when not whole.
func bytes(n int64) string {
	for _, u := range []struct {
		s string
		f int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.f {
			if n%u.f == 0 {
				return fmt.Sprintf("%d%s", n/u.f, u.s)
			}
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.f), u.s)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// CodeResourcesUnavailable: the attempt requests more than its host can
// ever offer.
const CodeResourcesUnavailable = "ResourcesUnavailable"

// HostResources is what a driver that places attempts on one host tells
// planning: what the host offers, and whether an attempt that requests
// more fails at once (Fail) or waits in WAITING_FOR_RESOURCES, up to its
// max_queued_time.
type HostResources struct {
	Host Host
	Fail bool
}

// planResources is the resources part of the limits step: with o set, it
// reads the attempt's request and checks it against the host. done says
// p is the plan (a failure, or a wait); an attempt whose queued time ran
// out instead gets its timeout's message extended with what it waited for.
func (c *Core) planResources(spec *task.TaskSpec, a *store.Action, o *HostResources, lim *limits) (req Request, p Plan, done bool) {
	if o == nil {
		return req, Plan{}, false // the driver's scheduler reads the requests itself
	}
	tmpl := spec.GetTaskTemplate()
	req, err := RequestOf(tmpl.GetContainer().GetResources(), tmpl.GetExtendedResources())
	if err != nil {
		return req, c.failPlan(spec, a, machine.KindUser, CodeLaunchFailed, err.Error()), true
	}
	missing := o.Host.Missing(req)
	switch {
	case missing == "":
		return req, Plan{}, false
	case o.Fail:
		return req, c.failPlan(spec, a, machine.KindUser, CodeResourcesUnavailable,
			"the task requests more than this host can offer: "+missing), true
	case lim.expired != nil:
		if lim.expired.Code == machine.CodeQueuedTimeout {
			lim.expired.Message += "; it waited for " + missing
		}
		return req, Plan{}, false
	}
	return req, Plan{Spec: spec, Event: machine.Wait{Attempt: uint32(a.Attempts), Reason: "the host cannot offer " + missing},
		RetryAfter: lim.queuedLeft}, true
}
