package kube

import (
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

// An attempt's log context names the Pod its logs are read from (the one
// Logs reads) and the task's container, in the namespace its TaskAction is in.
func TestLogContextNamesTheAttemptsPod(t *testing.T) {
	key := store.RunKey{Project: "p", Domain: "development", RunName: "r1"}.Action("a0")
	for _, perProject := range []bool{false, true} {
		d := &Driver{cfg: config.KubernetesExecutor{Namespace: "flyte", NamespacePerProject: perProject}}
		lc, err := d.LogContext(key, 2)
		if err != nil {
			t.Fatal(err)
		}
		name := d.nameOf(key)
		pod := lc.GetPods()[0]
		if lc.GetPrimaryPodName() != podNameFor(name.Name, 2) || pod.GetPodName() != lc.GetPrimaryPodName() ||
			pod.GetNamespace() != name.Namespace || pod.GetPrimaryContainerName() != containerName ||
			pod.GetContainers()[0].GetContainerName() != containerName {
			t.Fatalf("per project %v: %v, want Pod %s in %s", perProject, lc, podNameFor(name.Name, 2), name.Namespace)
		}
	}
}
