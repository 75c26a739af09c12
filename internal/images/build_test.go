package images

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/testkit"
)

// TestConcurrentBuildsBuildOnce runs two builds of one spec at once, with a
// fake uv that records each call and, creating the environment, waits at a
// gate the test opens: the second build waits for the first's lock, then
// finds the environment built and installs nothing.
func TestConcurrentBuildsBuildOnce(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1) on this host: builds of one spec are not serialised")
	}
	dir := t.TempDir()
	s := NewStore(filepath.Join(dir, "store"), 0, slog.New(slog.DiscardHandler))
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	calls, gate := filepath.Join(dir, "calls"), filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	uv := filepath.Join(dir, "uv")
	fake := fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %s\nif [ \"$1\" = venv ]; then mkdir -p \"$6/bin\"; read x < %s; fi\n", calls, gate)
	if err := os.WriteFile(uv, []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Analyse(&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{pip("humanize")}})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("e", 32)
	start := func(name string) (*exec.Cmd, *testkit.Buffer) {
		out := &testkit.Buffer{}
		cmd := exec.Command("/bin/sh", "-c", s.Script(p, key, uv, "3.11", "", filepath.Join(dir, name+".reused")))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	first, firstOut := start("first")
	testkit.Eventually(t, "the first build creating the environment", 30*time.Second, func() bool {
		b, _ := os.ReadFile(calls)
		return bytes.Contains(b, []byte("venv"))
	})
	second, secondOut := start("second")
	select {
	case <-secondOut.AwaitText("waiting for it"):
	case <-time.After(30 * time.Second):
		t.Fatalf("the second build did not wait for the first:\n%s", secondOut.String())
	}
	// Open the gate: the first build goes on and finishes.
	f, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("go\n")
	_ = f.Close()
	for _, c := range []struct {
		cmd *exec.Cmd
		out *testkit.Buffer
	}{{first, firstOut}, {second, secondOut}} {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("a build failed: %v\n%s", err, c.out.String())
		}
	}
	b, _ := os.ReadFile(calls)
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "venv pip pip" {
		t.Errorf("uv was called for %v, want one build's venv and two installs (the SDK, the layer)", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "first.reused")); err == nil {
		t.Error("the first build says it reused the environment")
	}
	if _, err := os.Stat(filepath.Join(dir, "second.reused")); err != nil {
		t.Errorf("the second build does not say it reused the first's environment:\n%s", secondOut.String())
	}
}
