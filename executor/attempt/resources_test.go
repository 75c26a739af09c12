package attempt

import (
	"slices"
	"strings"
	"testing"

	"fmgr.dev/gen/go/flyteidl2/core"
)

func entries(kv ...string) []*core.Resources_ResourceEntry {
	names := map[string]core.Resources_ResourceName{"cpu": core.Resources_CPU, "memory": core.Resources_MEMORY, "gpu": core.Resources_GPU}
	var out []*core.Resources_ResourceEntry
	for i := 0; i < len(kv); i += 2 {
		out = append(out, &core.Resources_ResourceEntry{Name: names[kv[i]], Value: kv[i+1]})
	}
	return out
}

func TestRequestOf(t *testing.T) {
	a100 := &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "nvidia-tesla-a100"}}
	for _, c := range []struct {
		name    string
		res     *core.Resources
		ext     *core.ExtendedResources
		want    Request
		wantErr string
	}{
		{"nothing", nil, nil, Request{}, ""},
		{"requests", &core.Resources{Requests: entries("cpu", "1500m", "memory", "250Mi", "gpu", "1")}, a100,
			Request{CPUMillis: 1500, MemoryBytes: 250 << 20, GPUs: 1, GPUDevice: "nvidia-tesla-a100"}, ""},
		// Requests decide; a limit without a request is the request.
		{"requests over limits", &core.Resources{Requests: entries("cpu", "1"), Limits: entries("cpu", "4", "memory", "1Gi")}, nil,
			Request{CPUMillis: 1000, MemoryBytes: 1 << 30}, ""},
		{"not a quantity", &core.Resources{Requests: entries("memory", "lots")}, nil, Request{}, `memory resource "lots"`},
		{"negative", &core.Resources{Requests: entries("cpu", "-1")}, nil, Request{}, `cpu resource "-1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := RequestOf(c.res, c.ext)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestHostMissing(t *testing.T) {
	host := Host{CPUMillis: 2000, MemoryBytes: 4 << 30, GPUs: []GPU{{ID: "0", Name: "NVIDIA A100-SXM4-40GB"}, {ID: "1", Name: "NVIDIA L40S"}}}
	none := Host{CPUMillis: 2000, MemoryBytes: 4 << 30}
	tpu := core.GPUAccelerator_GOOGLE_TPU
	for _, c := range []struct {
		name string
		host Host
		req  Request
		want string
	}{
		{"nothing asked", none, Request{}, ""},
		{"fits exactly", host, Request{CPUMillis: 2000, MemoryBytes: 4 << 30, GPUs: 2}, ""},
		{"too many cpus", none, Request{CPUMillis: 3000}, "3 CPU (the host offers 2)"},
		{"too much memory", none, Request{MemoryBytes: 5 << 30}, "5Gi of memory (the host offers 4Gi)"},
		{"a gpu on a host without", none, Request{GPUs: 1}, "1 GPU (the host offers 0 GPUs)"},
		{"an A100 on a host without", none, Request{GPUs: 1, GPUDevice: "nvidia-tesla-a100"},
			"1 nvidia-tesla-a100 GPU (the host offers 0 nvidia-tesla-a100 GPUs)"},
		{"the model matters", host, Request{GPUs: 2, GPUDevice: "nvidia-tesla-a100"},
			"2 nvidia-tesla-a100 GPUs (the host offers 1 nvidia-tesla-a100 GPU)"},
		{"a model word, not a prefix", host, Request{GPUs: 1, GPUDevice: "nvidia-l4"}, "1 nvidia-l4 GPU (the host offers 0 nvidia-l4 GPUs)"},
		{"the model found", host, Request{GPUs: 1, GPUDevice: "nvidia-l40s"}, ""},
		{"another device class", host, Request{GPUs: 1, GPUClass: tpu}, "1 GOOGLE TPU device (the host offers 0 GOOGLE TPU devices)"},
		{"all at once", none, Request{CPUMillis: 2500, MemoryBytes: 4<<30 + 1, GPUs: 1},
			"2500m CPU (the host offers 2), 4.0Gi of memory (the host offers 4Gi), 1 GPU (the host offers 0 GPUs)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.host.Missing(c.req); got != c.want {
				t.Errorf("Missing(%+v) = %q, want %q", c.req, got, c.want)
			}
		})
	}
}

func TestHostTake(t *testing.T) {
	host := Host{CPUMillis: 2000, MemoryBytes: 4 << 30, GPUs: []GPU{{ID: "GPU-a"}, {ID: "GPU-b"}}}
	for _, c := range []struct {
		name     string
		req      Request
		use      Use
		wantGPUs []string
		wantBusy string
	}{
		{"idle", Request{CPUMillis: 1000, GPUs: 1}, Use{}, []string{"GPU-a"}, ""},
		// An attempt that asks for nothing always fits.
		{"no request on a full host", Request{}, Use{CPUMillis: 2000, MemoryBytes: 4 << 30}, nil, ""},
		{"the sum must fit", Request{CPUMillis: 1000}, Use{CPUMillis: 1500}, nil, "waiting for 1 CPU (1500m of 2 in use)"},
		{"memory in use", Request{MemoryBytes: 3 << 30}, Use{MemoryBytes: 2 << 30}, nil, "waiting for 3Gi of memory (2Gi of 4Gi in use)"},
		{"a free device", Request{GPUs: 1}, Use{GPUs: map[string]bool{"GPU-a": true}}, []string{"GPU-b"}, ""},
		{"devices held", Request{GPUs: 2}, Use{GPUs: map[string]bool{"GPU-b": true}}, nil, "waiting for 2 GPUs (1 of 2 in use)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gpus, busy := host.Take(c.req, c.use)
			var ids []string
			for _, g := range gpus {
				ids = append(ids, g.ID)
			}
			if busy != c.wantBusy || !slices.Equal(ids, c.wantGPUs) {
				t.Errorf("Take(%+v, %+v) = %v, %q; want %v, %q", c.req, c.use, ids, busy, c.wantGPUs, c.wantBusy)
			}
		})
	}
}
