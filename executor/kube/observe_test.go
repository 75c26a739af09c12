package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// observe tells a container the runtime could not start (any kubelet's
// words for it) from one whose command ran and failed: the first is the
// platform's launch failure carrying the runtime's message, the second the
// task's exit.
func TestObserveContainerThatCouldNotStart(t *testing.T) {
	const containerd = `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: ` +
		`unable to start container process: exec: "a0": executable file not found in $PATH: unknown`
	terminated := func(reason, msg string, code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, Message: msg, ExitCode: code}}
	}
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	for _, tc := range []struct {
		name  string
		phase corev1.PodPhase
		state corev1.ContainerState
		obs   observation
		why   string
		code  int
	}{
		{"containerd StartError", corev1.PodFailed, terminated("StartError", containerd, 128), podNotStarted, "StartError: " + containerd, 0},
		{"docker ContainerCannotRun", corev1.PodFailed, terminated("ContainerCannotRun", `exec: "a0": executable file not found in $PATH`, 128),
			podNotStarted, `ContainerCannotRun: exec: "a0": executable file not found in $PATH`, 0},
		{"missing secret", corev1.PodPending, waiting("CreateContainerConfigError", `secret "creds" not found`), podNotStarted,
			`CreateContainerConfigError: secret "creds" not found`, 0},
		{"create error", corev1.PodPending, waiting("CreateContainerError", "context deadline exceeded"), podNotStarted,
			"CreateContainerError: context deadline exceeded", 0},
		{"run error without a message", corev1.PodPending, waiting("RunContainerError", ""), podNotStarted, "RunContainerError", 0},
		{"bad image name", corev1.PodPending, waiting("InvalidImageName", `couldn't parse image name "A"`), podBroken,
			`InvalidImageName: couldn't parse image name "A"`, 0},
		{"pulling", corev1.PodPending, waiting("ContainerCreating", ""), podWaiting, "", 0},
		{"the command failed", corev1.PodFailed, terminated("Error", "", 128), podEnded, "", 128},
		{"out of memory", corev1.PodFailed, terminated("OOMKilled", "", 137), podEnded, "OOMKilled", 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{Phase: tc.phase,
				ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: tc.state}}}}
			obs, exit, why := observe(pod)
			if obs != tc.obs || why != tc.why || exit.Code != tc.code {
				t.Errorf("observe = %v, exit %d, %q; want %v, exit %d, %q", obs, exit.Code, why, tc.obs, tc.code, tc.why)
			}
		})
	}
}
