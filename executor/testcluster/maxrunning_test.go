package testcluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/testkit"
)

// TestMaxRunning: with one slot, a second Pod waits, Pending, until the
// first one's process ended, and then runs. Each Pod's script records
// whether it started before or after the first one ended.
func TestMaxRunning(t *testing.T) {
	c := testcluster.ForTest(t, testcluster.Options{MaxRunning: 1})
	dir := t.TempDir()
	first := pod("first", `while [ ! -e "$D/release" ]; do sleep 0.05; done; touch "$D/first-ended"`)
	second := pod("second", `if [ -e "$D/first-ended" ]; then touch "$D/after"; else touch "$D/overlap"; fi`)
	for _, p := range []*corev1.Pod{first, second} {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "D", Value: dir}}
	}
	create(t, c, first)
	waitPod(t, c, "first", "to run", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	create(t, c, second)
	// The agent took the second Pod on and says it waits.
	testkit.EventuallyErr(t, "the agent to hold the second Pod back", testcluster.Patience, func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(c.Dir, "testcluster.log"))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "pod waiting for a slot") && strings.Contains(line, "pod="+ns+"/second") {
				return true, nil
			}
		}
		return false, err
	})
	if got := waitPod(t, c, "second", "to be bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }); got.Status.Phase != corev1.PodPending {
		t.Errorf("the second Pod is %s while the first holds the only slot, want Pending", got.Status.Phase)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "second"} {
		if got := waitPod(t, c, name, "to end", terminal); got.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s ended %s, want Succeeded", name, got.Status.Phase)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "overlap")); err == nil {
		t.Error("the second Pod's process ran while the first's held the only slot")
	}
	if _, err := os.Stat(filepath.Join(dir, "after")); err != nil {
		t.Errorf("the second Pod's process did not run after the first ended: %v", err)
	}
}
