package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// executor.local.containers: its documented defaults, valid values, the
// old values rejected naming the new ones, and a bad one named by its key.
func TestLocalContainersSection(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Executor.Local.Containers; got.Runtime != ContainerRuntimeRunc || got.Images != filepath.Join(c.Home, "images") {
		t.Errorf("defaults %+v, want runtime %q and images in %s", got, ContainerRuntimeRunc, filepath.Join(c.Home, "images"))
	}
	for _, r := range []string{ContainerRuntimeHost, ContainerRuntimeOff, ContainerRuntimeRunc} {
		ok := writeFile(t, t.TempDir(), "ok.yaml", "executor:\n  local:\n    containers:\n      runtime: "+r+"\n")
		if c, err := Load(Sources{Files: []string{ok}}); err != nil || c.Executor.Local.Containers.Runtime != r {
			t.Errorf("runtime %s: %+v %v", r, c.Executor.Local.Containers, err)
		}
	}
	for _, old := range []string{"auto", "namespace"} {
		f := writeFile(t, t.TempDir(), "old.yaml", "executor:\n  local:\n    containers:\n      runtime: "+old+"\n")
		_, err := Load(Sources{Files: []string{f}})
		if err == nil || !strings.Contains(err.Error(), "no longer a runtime") || !strings.Contains(err.Error(), "host (the command on the host, unsafe") {
			t.Errorf("the old runtime %s is not rejected naming the new ones: %v", old, err)
		}
	}
	bad := writeFile(t, t.TempDir(), "bad.yaml", "executor:\n  local:\n    containers:\n      runtime: docker\n")
	_, err = Load(Sources{Files: []string{bad}})
	if err == nil || !strings.Contains(err.Error(), "executor.local.containers.runtime:") || !strings.Contains(err.Error(), `"docker"`) {
		t.Errorf("a bad runtime is not rejected by name: %v", err)
	}
}
