package testcluster_test

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/executor/testcluster/nodeagent"
)

// TestInitContainersSidecarsAndEmptyDirs: the agent runs a Pod's init
// containers before its containers, several containers together with each
// one's end reported while the others run, and emptyDir volumes as the
// Pod's own directories bound at their mount path for its processes alone.
// A failing init container fails the Pod before its containers start.
func TestInitContainersSidecarsAndEmptyDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("emptyDir volumes need a private mount namespace, which only root can make")
	}
	c := testcluster.ForTest(t)
	mnt := filepath.Join(t.TempDir(), "shared") // missing: the agent makes the mount point
	release := filepath.Join(t.TempDir(), "release")
	shared := corev1.Volume{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	mount := []corev1.VolumeMount{{Name: "shared", MountPath: mnt}}
	sh := func(name, script string) corev1.Container {
		return corev1.Container{Name: name, Image: "unused", Command: []string{"sh", "-c", script}, VolumeMounts: mount,
			Env: []corev1.EnvVar{{Name: "MNT", Value: mnt}, {Name: "RELEASE", Value: release}}}
	}

	p := pod("staged", "")
	p.Spec.Volumes = []corev1.Volume{shared}
	p.Spec.InitContainers = []corev1.Container{sh("first", `echo hello > "$MNT/greeting"`), sh("second", `cat "$MNT/greeting" > "$MNT/seen-by-second"`)}
	p.Spec.Containers = []corev1.Container{
		sh("task", `cat "$MNT/greeting" > "$MNT/copy" && exit 3`),
		// The sidecar outlives the task until the test has seen the
		// task's end in the Pod's status while the Pod still runs.
		sh("sidecar", `while [ ! -e "$RELEASE" ]; do sleep 0.1; done; cat "$MNT/copy" > "$MNT/uploaded"`),
	}
	created := create(t, c, p)
	waitPod(t, c, "staged", "shows its task ended while its sidecar runs", func(p *corev1.Pod) bool {
		st := status(p, "task")
		return p.Status.Phase == corev1.PodRunning && st != nil && st.State.Terminated != nil && st.State.Terminated.ExitCode == 3 &&
			status(p, "sidecar") != nil && status(p, "sidecar").State.Running != nil
	})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := waitPod(t, c, "staged", "ends", terminal)
	if done.Status.Phase != corev1.PodFailed {
		t.Errorf("a Pod whose task exited 3 is %s, want Failed", done.Status.Phase)
	}
	if st := status(done, "sidecar"); st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
		t.Errorf("the sidecar's status: %+v", st)
	}
	if len(done.Status.InitContainerStatuses) != 2 {
		t.Errorf("init container statuses: %+v", done.Status.InitContainerStatuses)
	}
	for _, st := range done.Status.InitContainerStatuses {
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			t.Errorf("init container %s: %+v", st.Name, st.State)
		}
	}
	vol := filepath.Join(nodeagent.PodDir(filepath.Join(c.Dir, "pods"), created), "volumes", "shared")
	for name, want := range map[string]string{"greeting": "hello\n", "seen-by-second": "hello\n", "copy": "hello\n", "uploaded": "hello\n"} {
		if b, err := os.ReadFile(filepath.Join(vol, name)); err != nil || string(b) != want {
			t.Errorf("the Pod's volume holds %s = %q (%v), want %q", name, b, err, want)
		}
	}
	if entries, err := os.ReadDir(mnt); err != nil || len(entries) != 0 {
		t.Errorf("the host's %s holds %v (%v): the volume was not private to the Pod's processes", mnt, entries, err)
	}

	marker := filepath.Join(t.TempDir(), "ran")
	f := pod("init-fails", "")
	f.Spec.InitContainers = []corev1.Container{{Name: "stage", Image: "unused", Command: []string{"sh", "-c", "echo cannot stage >&2; exit 5"},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}}
	f.Spec.Containers = []corev1.Container{{Name: "task", Image: "unused", Command: []string{"sh", "-c", `touch "` + marker + `"`}}}
	create(t, c, f)
	failed := waitPod(t, c, "init-fails", "ends", terminal)
	if failed.Status.Phase != corev1.PodFailed {
		t.Errorf("a Pod whose init container exited 5 is %s, want Failed", failed.Status.Phase)
	}
	if ics := failed.Status.InitContainerStatuses; len(ics) != 1 || ics[0].State.Terminated == nil ||
		ics[0].State.Terminated.ExitCode != 5 || ics[0].State.Terminated.Message != "cannot stage" {
		t.Errorf("the failed init container's status: %+v", ics)
	}
	if st := status(failed, "task"); st == nil || st.State.Waiting == nil || st.State.Waiting.Reason != "PodInitializing" {
		t.Errorf("the task of a Pod whose init failed: %+v", st)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the task ran although its Pod's init container failed")
	}
}

// status is the status of container name of p.
func status(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}
