package config

import (
	"strings"
	"testing"
)

func TestLocalResources(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Executor.Local.Resources, (LocalResources{Unsatisfiable: "wait", GPUs: -1}); got != want {
		t.Errorf("default executor.local.resources = %+v, want %+v (wait; the host's CPUs, memory and GPUs detected)", got, want)
	}

	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "executor:\n  local:\n    resources:\n      unsatisfiable: fail\n      cpus: 2\n      memory: 8Gi\n      gpus: 0\n")
	c, err = Load(Sources{Files: []string{good}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Executor.Local.Resources, (LocalResources{Unsatisfiable: "fail", CPUs: "2", Memory: "8Gi", GPUs: 0}); got != want {
		t.Errorf("executor.local.resources = %+v, want %+v", got, want)
	}

	bad := writeFile(t, dir, "bad.yaml", "executor:\n  local:\n    resources:\n      unsatisfiable: sometimes\n      cpus: many\n      memory: -1Gi\n      gpus: -2\n")
	_, err = Load(Sources{Files: []string{bad}})
	for _, key := range []string{"resources.unsatisfiable:", "resources.cpus:", "resources.memory:", "resources.gpus:"} {
		if err == nil || !strings.Contains(err.Error(), "executor.local."+key) {
			t.Errorf("error does not name executor.local.%s\n%v", key, err)
		}
	}
}
