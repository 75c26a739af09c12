package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"fmgr.dev/internal/testkit"
)

// runSpec is what `docker run` would be given: extra env and bind mounts
// (container path → host path). The host's network stands for -p.
type runSpec struct {
	env    []string
	mounts map[string]string
}

// container is one `runc run` of the unpacked image.
type container struct {
	id     string
	cmd    *exec.Cmd
	done   chan struct{}
	output *testkit.Buffer
}

var containerSeq atomic.Int64

// dockerCaps are the capabilities docker gives a container by default.
var dockerCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// start runs the image's entrypoint in rootfs with runc, as docker would
// with spec, and stops it when the test ends if it has not been stopped.
func start(t *testing.T, rootfs string, spec runSpec) *container {
	t.Helper()
	bundle := filepath.Dir(rootfs)
	var cfg v1.Config
	b, err := os.ReadFile(filepath.Join(bundle, "image-config.json"))
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	// runc spec's default, changed to what docker run does.
	_ = os.Remove(filepath.Join(bundle, "config.json"))
	if b, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, b)
	}
	var s map[string]any
	b, err = os.ReadFile(filepath.Join(bundle, "config.json"))
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	proc := s["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = append(append([]string{}, cfg.Entrypoint...), cfg.Cmd...)
	proc["env"] = append(append([]string{}, cfg.Env...), spec.env...)
	proc["cwd"] = "/"
	proc["capabilities"] = map[string]any{"bounding": dockerCaps, "effective": dockerCaps, "permitted": dockerCaps}
	proc["noNewPrivileges"] = false
	root := s["root"].(map[string]any)
	root["path"], root["readonly"] = "rootfs", false
	mounts := s["mounts"].([]any)
	var targets []string
	for target := range spec.mounts {
		targets = append(targets, target)
	}
	sort.Strings(targets)
	for _, target := range targets {
		mounts = append(mounts, map[string]any{"destination": target, "type": "bind", "source": spec.mounts[target], "options": []string{"rbind", "rw"}})
	}
	// The host's resolver, as docker provides one.
	mounts = append(mounts, map[string]any{"destination": "/etc/resolv.conf", "type": "bind", "source": "/etc/resolv.conf", "options": []string{"rbind", "ro"}})
	s["mounts"] = mounts
	linux := s["linux"].(map[string]any)
	var ns []any
	for _, n := range linux["namespaces"].([]any) {
		if n.(map[string]any)["type"] != "network" { // --network host
			ns = append(ns, n)
		}
	}
	linux["namespaces"] = ns
	b, err = json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	c := &container{id: fmt.Sprintf("fm-sandbox-test-%d-%d", os.Getpid(), containerSeq.Add(1)), done: make(chan struct{}), output: &testkit.Buffer{}}
	c.cmd = exec.Command("runc", "run", "--bundle", bundle, c.id)
	c.cmd.Stdout, c.cmd.Stderr = c.output, c.output
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { c.stop(t) })
	return c
}

func (c *container) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM (docker stop), waits for the manager to end, and
// removes the container.
func (c *container) stop(t *testing.T) {
	t.Helper()
	if !c.exited() {
		_ = exec.Command("runc", "kill", c.id, "TERM").Run()
		select {
		case <-c.done:
		case <-time.After(time.Minute):
			_ = exec.Command("runc", "kill", c.id, "KILL").Run()
			<-c.done
			t.Errorf("the sandbox did not stop within a minute of SIGTERM:\n%s", c.output.Tail(40))
		}
	}
	_ = exec.Command("runc", "delete", "--force", c.id).Run()
}
