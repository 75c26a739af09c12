package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/local/images"
	"fmgr.dev/executor/local/images/imagetest"
)

// Raw container tasks end to end (testdata/sdk/drive_containers.py,
// wf_containers.py): flyte.extras.ContainerTask commands that know nothing
// of Flyte get their inputs in the command's templates and as files under
// /var/inputs, and their outputs are read back from /var/outputs, so a
// Python parent uses them like any task: on the local executor, and in a
// Pod whose init container and sidecar (`flyte-manager copilot`) stage the
// data on the kubernetes executor.
func testContainers(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	type containerRun struct {
		Run, Phase, Error string
		Output            any
		Events            []string
	}
	var res struct{ Add, Files, Explode, Forgetful, Probe containerRun }
	// Other processes on this host may have left files there: only what
	// appears or changes while the scenario runs is its own.
	before := hostOutputs()
	driver(t, ctx, &res, "drive_containers.py", sdkEndpoint(m), m.Home)
	t.Run("ints", func(t *testing.T) {
		r := res.Add
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("run %s is %s: %s", r.Run, r.Phase, r.Error)
		}
		// Two containers ran at once and a third on their results: each read
		// its own inputs and left its own outputs.
		checkJSON(t, "the parent's output", r.Output, `"2 plus 3=5; 20 plus 30=50; total=55"`)
	})
	t.Run("files", func(t *testing.T) {
		r := res.Files
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("run %s is %s: %s", r.Run, r.Phase, r.Error)
		}
		checkJSON(t, "what the containers saw and returned", r.Output,
			`{"name":"genome.fasta","lines":"3","copy":"copied:\n>seq1\nACGT\nTTGA\n","first":"first line"}`)
	})
	t.Run("failing-command", func(t *testing.T) {
		r := res.Explode
		if r.Phase != "FAILED" {
			t.Fatalf("run %s of a command exiting 3 is %s, want FAILED", r.Run, r.Phase)
		}
		// The local executor ran the image in runc, and the action's events
		// say so (a Pod runs it on kubernetes).
		if !m.Kubernetes && !slices.ContainsFunc(r.Events, func(e string) bool {
			return strings.Contains(e, "image localhost/fm-test/busybox:1") && strings.Contains(e, "in runc as uid ") && !strings.Contains(e, "in runc as uid 0,")
		}) {
			t.Errorf("run %s: events %q do not say that the image ran in runc", r.Run, r.Events)
		}
		for _, want := range []string{"the container's command exited with code 3", "container exploded e2e-c41"} {
			if !strings.Contains(r.Error, want) {
				t.Errorf("run %s: error %q does not say %q", r.Run, r.Error, want)
			}
		}
		if strings.Contains(r.Error, "error.pb") {
			t.Errorf("run %s: error %q speaks of the runtime's error file, which a raw container knows nothing of", r.Run, r.Error)
		}
	})
	t.Run("missing-output", func(t *testing.T) {
		r := res.Forgetful
		if r.Phase != "FAILED" {
			t.Fatalf("run %s of a command that wrote no output is %s, want FAILED", r.Run, r.Phase)
		}
		if want := `did not write its output "answer": expected /var/outputs/answer`; !strings.Contains(r.Error, want) {
			t.Errorf("run %s: error %q does not say %q", r.Run, r.Error, want)
		}
	})
	t.Run("isolation", func(t *testing.T) {
		if m.Kubernetes {
			t.Skip("the test cluster's node agent runs a Pod's containers as host processes")
		}
		r := res.Probe
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("run %s is %s: %s", r.Run, r.Phase, r.Error)
		}
		report, _ := r.Output.(string)
		got := map[string]string{}
		for _, l := range strings.Split(report, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				got[k] = v
			}
		}
		// An unprivileged user without capabilities, in its own pid and
		// network namespaces, without the host's files.
		if got["uid"] == "" || got["uid"] == "0" {
			t.Errorf("the container ran as uid %q", got["uid"])
		}
		for k, want := range map[string]string{"capeff": "0000000000000000", "ifaces": "lo:", "home": "absent"} {
			if got[k] != want {
				t.Errorf("%s is %q in the container, want %q (report %q)", k, got[k], want, report)
			}
		}
		if !strings.HasPrefix(got["pid1"], "/bin/sh -c") {
			t.Errorf("pid 1 in the container is %q, not its own command", got["pid1"])
		}
	})
	// Both executors bind the data directories in a namespace of the
	// command's own (the test cluster's node agent as the local executor):
	// nothing it wrote is in the host's directories.
	after := hostOutputs()
	for _, name := range []string{"total", "label", "name", "lines", "copy", "first"} {
		if at, ok := after[name]; ok && at != before[name] {
			t.Errorf("a container's output %s landed in the host's /var/outputs", name)
		}
	}
}

// hostOutputs are the modification times of the entries in the host's
// /var/outputs.
func hostOutputs() map[string]time.Time {
	entries, _ := os.ReadDir("/var/outputs")
	out := map[string]time.Time{}
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			out[e.Name()] = info.ModTime()
		}
	}
	return out
}

// loadTestImages puts the containers scenario's image (busybox, built from
// the host's busybox-static) in the image store of the manager at home, as
// `flyte-manager image load` would. Without busybox-static the scenario's
// runs fail saying the image is not loaded.
func loadTestImages(t *testing.T, home string) {
	t.Helper()
	if _, err := os.Stat(imagetest.BusyboxPath); err != nil {
		return
	}
	s, err := images.Open(filepath.Join(home, "images"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(imagetest.BusyboxLayout(t), ""); err != nil {
		t.Fatal(err)
	}
}
