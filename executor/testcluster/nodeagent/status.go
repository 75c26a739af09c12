package nodeagent

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/local/process"
)

// The node's (and so every Pod's) address: the processes run on this host.
const hostIP = "127.0.0.1"

// outcome is how a Pod's container ended, in a kubelet's terms.
type outcome struct {
	exitCode int32
	signal   int32
	reason   string // the container's; "" derives Completed / Error from exitCode
	message  string
	// podReason and podMessage explain a Pod-level failure (DeadlineExceeded).
	podReason, podMessage string
	started, finished     metav1.Time
}

// succeeded says whether the Pod ends Succeeded rather than Failed.
func (o outcome) succeeded() bool { return o.exitCode == 0 && o.podReason == "" && o.reason == "" }

// exited translates a process's end into the container's terminated state.
func exited(st process.ExitStatus, pod *corev1.Pod, c *corev1.Container, started metav1.Time) outcome {
	out := outcome{exitCode: int32(st.Code), started: started, finished: metav1.NewTime(st.Ended)}
	if st.Ended.IsZero() {
		out.finished = metav1.Now()
	}
	if st.Signal != "" {
		// As container runtimes report it: 128 + the signal's number.
		out.signal = signalNumber(st.Signal)
		out.exitCode = 128 + out.signal
	}
	switch {
	case st.OOMKilled:
		out.reason, out.exitCode = "OOMKilled", 137
		out.message = fmt.Sprintf("the container went over its memory limit of %s", process.FormatBytes(st.MemoryLimit))
	case st.Err != nil:
		out.reason, out.exitCode = "Error", 128
		out.message = "the node agent lost track of the process"
	}
	if st.TimedOut {
		out.podReason = "DeadlineExceeded"
		out.podMessage = fmt.Sprintf("Pod was active on the node longer than the specified deadline (%ds)", *pod.Spec.ActiveDeadlineSeconds)
	}
	if out.message == "" && out.exitCode != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		out.message = logTail(st.StdoutTail, st.StderrTail)
	}
	return out
}

// notStarted is the outcome of a container the agent could not start: as a
// runtime reports a failed start, exit code 128 with the reason given.
func notStarted(pod *corev1.Pod, reason, message string) outcome {
	now := metav1.Now()
	return outcome{exitCode: 128, reason: reason, message: message, started: now, finished: now}
}

// startFailure words err, why the process of spec could not start, as a
// container runtime words a container it could not start (containerd with
// runc: `failed to create containerd task: ... exec: "a0": executable file
// not found in $PATH: unknown`): what reads the Pod's status reads what a
// kubelet would report. A missing command also names the PATH it was
// looked up on, the node's own: on this node that is where commands come
// from, not an image.
func startFailure(spec process.Spec, err error) string {
	what := err.Error()
	if errors.Is(err, exec.ErrNotFound) {
		what = fmt.Sprintf("exec: %q: executable file not found in $PATH", spec.Args[0])
		if path, ok := envMap(spec.Env)["PATH"]; ok {
			what += fmt.Sprintf(" (PATH=%s)", path)
		}
	}
	return "failed to start the container's process: " + what + ": unknown"
}

// running marks the Pod Running, its containers started at started (pids
// in their order; 0: no process, the noop runner).
func running(s *corev1.PodStatus, pod *corev1.Pod, started metav1.Time, pids ...int) {
	s.Phase = corev1.PodRunning
	setAddresses(s, pod)
	s.StartTime = &started
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		setCondition(s, t, corev1.ConditionTrue, "", started)
	}
	for i, pid := range pids {
		c := &pod.Spec.Containers[i]
		ready := true
		setContainer(&s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ContainerID: containerID(pid), Ready: true, Started: &ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
}

// ended records that container c (an init container when init) ended
// with out, keeping its container ID.
func ended(s *corev1.PodStatus, c *corev1.Container, init bool, out outcome) {
	list := &s.ContainerStatuses
	if init {
		list = &s.InitContainerStatuses
	}
	var id string
	for _, cs := range *list {
		if cs.Name == c.Name {
			id = cs.ContainerID
		}
	}
	reason := out.reason
	if reason == "" {
		reason = "Completed"
		if out.exitCode != 0 {
			reason = "Error"
		}
	}
	started := false
	setContainer(list, corev1.ContainerStatus{
		Name:        c.Name,
		Image:       c.Image,
		ContainerID: id,
		Started:     &started,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode:    out.exitCode,
			Signal:      out.signal,
			Reason:      reason,
			Message:     out.message,
			StartedAt:   out.started,
			FinishedAt:  out.finished,
			ContainerID: id,
		}},
	})
}

// setContainer replaces the status of st's container in list, or adds it.
func setContainer(list *[]corev1.ContainerStatus, st corev1.ContainerStatus) {
	for i := range *list {
		if (*list)[i].Name == st.Name {
			(*list)[i] = st
			return
		}
	}
	*list = append(*list, st)
}

// terminated marks the Pod Succeeded or Failed: out is the outcome that
// decides (the first failure among its containers, else the last end);
// containers the status does not show ended yet end with out.
func terminated(s *corev1.PodStatus, pod *corev1.Pod, out outcome) {
	s.Phase = corev1.PodFailed
	if out.succeeded() {
		s.Phase = corev1.PodSucceeded
	}
	s.Reason, s.Message = out.podReason, out.podMessage
	setAddresses(s, pod)
	if s.StartTime == nil {
		s.StartTime = &out.started
	}
	setCondition(s, corev1.PodReadyToStartContainers, corev1.ConditionFalse, "", out.finished)
	setCondition(s, corev1.PodInitialized, corev1.ConditionTrue, "", out.finished)
	setCondition(s, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted", out.finished)
	setCondition(s, corev1.PodReady, corev1.ConditionFalse, "PodCompleted", out.finished)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if i := slices.IndexFunc(s.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.Name == c.Name }); i >= 0 &&
			s.ContainerStatuses[i].State.Terminated != nil {
			continue
		}
		ended(s, c, false, out)
	}
}

// setAddresses sets the node's address and the Pod's (its own loopback
// address when it has one: serve.go).
func setAddresses(s *corev1.PodStatus, pod *corev1.Pod) {
	ip := podIP(pod)
	s.HostIP, s.PodIP = hostIP, ip
	s.HostIPs = []corev1.HostIP{{IP: hostIP}}
	s.PodIPs = []corev1.PodIP{{IP: ip}}
}

// podIP is the Pod's address: the one the agent gave it (set on the run's
// copy before anything starts), else the node's.
func podIP(pod *corev1.Pod) string {
	if pod.Status.PodIP != "" {
		return pod.Status.PodIP
	}
	return hostIP
}

// setCondition sets a condition, keeping its transition time when its
// status does not change.
func setCondition(s *corev1.PodStatus, t corev1.PodConditionType, status corev1.ConditionStatus, reason string, at metav1.Time) {
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = at
		}
		c.Status, c.Reason = status, reason
		return
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: at})
}

// containerID names the process as a runtime names a container.
func containerID(pid int) string {
	if pid == 0 {
		return "noop://"
	}
	return fmt.Sprintf("process://%d", pid)
}

// signalNumber maps a signal's name as Go prints it ("killed") back to its
// number.
func signalNumber(name string) int32 {
	for n := 1; n < 65; n++ {
		if syscall.Signal(n).String() == name {
			return int32(n)
		}
	}
	return int32(syscall.SIGKILL)
}

// logTail is the termination message of FallbackToLogsOnError: the last
// lines of output, at most 2 KiB as in Kubernetes.
func logTail(stdout, stderr []string) string {
	lines := append(append([]string(nil), stdout...), stderr...)
	msg := strings.Join(lines, "\n")
	if len(msg) > 2048 {
		msg = msg[len(msg)-2048:]
	}
	return msg
}

// initFailed marks the Pod Failed because init container c ended with
// out: its containers never started, and say so as a kubelet does.
func initFailed(s *corev1.PodStatus, pod *corev1.Pod, c *corev1.Container, out outcome) {
	ended(s, c, true, out)
	s.Phase = corev1.PodFailed
	setAddresses(s, pod)
	if s.StartTime == nil {
		s.StartTime = &out.started
	}
	setCondition(s, corev1.PodInitialized, corev1.ConditionFalse, "PodFailed", out.finished)
	setCondition(s, corev1.ContainersReady, corev1.ConditionFalse, "PodFailed", out.finished)
	setCondition(s, corev1.PodReady, corev1.ConditionFalse, "PodFailed", out.finished)
	for i := range pod.Spec.Containers {
		setContainer(&s.ContainerStatuses, corev1.ContainerStatus{Name: pod.Spec.Containers[i].Name, Image: pod.Spec.Containers[i].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}})
	}
}
