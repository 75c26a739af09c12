package config

import (
	"strings"
	"testing"
)

// executor.local.containers: its documented default, a valid value, and a
// bad one named by its key.
func TestLocalContainersSection(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Executor.Local.Containers.Runtime; got != ContainerRuntimeAuto {
		t.Errorf("default runtime %q, want %q", got, ContainerRuntimeAuto)
	}
	ok := writeFile(t, t.TempDir(), "ok.yaml", "executor:\n  local:\n    containers:\n      runtime: namespace\n")
	if c, err := Load(Sources{Files: []string{ok}}); err != nil || c.Executor.Local.Containers.Runtime != ContainerRuntimeNamespace {
		t.Errorf("runtime namespace: %+v %v", c.Executor.Local.Containers, err)
	}
	bad := writeFile(t, t.TempDir(), "bad.yaml", "executor:\n  local:\n    containers:\n      runtime: docker\n")
	_, err = Load(Sources{Files: []string{bad}})
	if err == nil || !strings.Contains(err.Error(), "executor.local.containers.runtime:") || !strings.Contains(err.Error(), `"docker"`) {
		t.Errorf("a bad runtime is not rejected by name: %v", err)
	}
}
