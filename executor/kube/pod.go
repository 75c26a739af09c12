package kube

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/gen/go/flyteidl2/core"
)

// The pod plugin: one Pod per attempt, under the same task-process contract
// as a local process (the attempt core renders the argv and the
// environment), with the container's resources, the task's service
// account, and the action's labels; owned by its TaskAction so that
// deleting the TaskAction deletes its Pods.

// podWorkDir is the Pod's working directory below its attempt's output
// directory, when that is on shared file storage.
const podWorkDir = "work"

// podSpec is what buildPod needs besides the launch.
type podSpec struct {
	// base is the named PodTemplate's template, when the task names one.
	base *corev1.PodTemplateSpec
	// serviceAccount is used when the task names none.
	serviceAccount string
	// raw stages a raw container's data (see rawcontainer.go).
	raw rawOptions
	// build makes the Pod an image build's (see imagebuild.go).
	build *buildOptions
}

// buildPod builds the Pod of launch l of ta. An error is the task's: a
// resource quantity that does not parse.
func buildPod(ta *v1.TaskAction, l *attempt.Launch, o podSpec) (*corev1.Pod, error) {
	c := l.Container()
	res, err := resources(c.GetResources())
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if o.base != nil {
		pod.ObjectMeta = *o.base.ObjectMeta.DeepCopy()
		pod.Spec = *o.base.Spec.DeepCopy()
	}
	pod.Name = podName(ta, l.Attempt)
	pod.Namespace = ta.Namespace
	pod.Labels = maps.Clone(pod.Labels)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	maps.Copy(pod.Labels, ta.StandardLabels())
	pod.Labels[LabelManaged] = managedBy
	pod.Labels[labelAttempt] = fmt.Sprint(l.Attempt)
	if id := l.Spec.GetTaskTemplate().GetId(); id.GetName() != "" {
		pod.Labels[labelTask] = v1.LabelValue(id.GetName())
	}
	yes := true
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1.GroupVersion.String(), Kind: "TaskAction", Name: ta.Name, UID: ta.UID,
		Controller: &yes, BlockOwnerDeletion: &yes,
	}}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if sa := l.Spec.GetTaskTemplate().GetSecurityContext().GetRunAs().GetK8SServiceAccount(); sa != "" {
		pod.Spec.ServiceAccountName = sa
	} else if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = o.serviceAccount
	}

	// The task's container replaces the template's primary container (the
	// one named "primary", else the first), keeping what the template adds
	// to it (volume mounts, security context...).
	ctr := corev1.Container{}
	at := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == "primary" })
	if at < 0 && len(pod.Spec.Containers) > 0 {
		at = 0
	}
	if at >= 0 {
		ctr = pod.Spec.Containers[at]
	}
	ctr.Name = containerName
	ctr.Image = c.GetImage()
	n := min(len(c.GetCommand()), len(l.Args))
	ctr.Command, ctr.Args = l.Args[:n], l.Args[n:]
	if n == 0 { // args only: they are the whole argv, so no image entrypoint runs first
		ctr.Command, ctr.Args = l.Args, nil
	}
	ctr.Env = append(ctr.Env, envVars(l.Env)...)
	ctr.Resources = res
	if ctr.WorkingDir == "" && filepath.IsAbs(l.OutDir) {
		// file:// storage the Pods share (sharedFileStorage): the SDK's
		// File.from_local and Dir.from_local then return the local path of
		// what the task wrote instead of uploading it, so the task works in
		// a directory of its attempt on that storage, which outlives the
		// Pod as long as the run's data does. A working directory the
		// task's PodTemplate sets is the user's choice and stays.
		ctr.WorkingDir = filepath.Join(l.OutDir, podWorkDir)
	}
	if o.build != nil {
		buildContainer(pod, &ctr, o.build)
	}
	if at >= 0 {
		pod.Spec.Containers[at] = ctr
	} else {
		at, pod.Spec.Containers = 0, []corev1.Container{ctr}
	}
	if err := addCopilot(pod, &pod.Spec.Containers[at], l, o.raw); err != nil {
		return nil, err
	}
	return pod, nil
}

// envVars is the attempt's environment, in the order BuildEnv produced.
func envVars(env contract.Env) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env))
	for _, kv := range env {
		out = append(out, corev1.EnvVar{Name: kv.Key, Value: kv.Value})
	}
	return out
}

// resources converts the task's resources; limits default to requests as
// the reference does, so a Pod is not left unbounded when the task set
// requests only.
func resources(r *core.Resources) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	conv := func(entries []*core.Resources_ResourceEntry, what string) (corev1.ResourceList, error) {
		if len(entries) == 0 {
			return nil, nil
		}
		list := corev1.ResourceList{}
		for _, e := range entries {
			name, ok := resourceNames[e.GetName()]
			if !ok {
				continue
			}
			q, err := resource.ParseQuantity(e.GetValue())
			if err != nil {
				return nil, fmt.Errorf("the task's %s %s %q is not a resource quantity: %v", e.GetName(), what, e.GetValue(), err)
			}
			list[name] = q
		}
		return list, nil
	}
	var err error
	if out.Requests, err = conv(r.GetRequests(), "request"); err != nil {
		return out, err
	}
	if out.Limits, err = conv(r.GetLimits(), "limit"); err != nil {
		return out, err
	}
	for name, q := range out.Requests {
		if _, set := out.Limits[name]; !set {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = q
		}
	}
	return out, nil
}

var resourceNames = map[core.Resources_ResourceName]corev1.ResourceName{
	core.Resources_CPU:               corev1.ResourceCPU,
	core.Resources_MEMORY:            corev1.ResourceMemory,
	core.Resources_GPU:               "nvidia.com/gpu",
	core.Resources_STORAGE:           corev1.ResourceStorage,
	core.Resources_EPHEMERAL_STORAGE: corev1.ResourceEphemeralStorage,
}

// observation is what a Pod says about its attempt.
type observation int

const (
	podWaiting observation = iota // not started yet
	podRunning
	podEnded
	podBroken     // the task's image can never start (see observe)
	podNotStarted // the container runtime could not start the container (see notStarted)
)

// notStarted are the reasons a kubelet gives for a task's container that
// its runtime could not create or start, whoever the runtime is: the
// container then ended without its command ever running (StartError from
// containerd and CRI-O, ContainerCannotRun from Docker, exit code 128), or
// it waits with the kubelet retrying (the Config and Container errors).
// Its message is the runtime's, e.g. `exec: "a0": executable file not
// found in $PATH`: the task never ran, so neither its exit code nor its
// missing error document says anything about it.
var notStarted = map[string]bool{
	"StartError":                 true,
	"ContainerCannotRun":         true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// observe reads pod: how far it got, and when it ended, its exit; the
// third value explains a broken, unstarted or failed Pod.
func observe(pod *corev1.Pod) (observation, contract.Exit, string) {
	st := taskStatus(pod)
	if st != nil {
		if t := st.State.Terminated; t != nil && notStarted[t.Reason] {
			return podNotStarted, contract.Exit{}, runtimeMessage(t.Reason, t.Message)
		}
		if w := st.State.Waiting; w != nil && notStarted[w.Reason] {
			return podNotStarted, contract.Exit{}, runtimeMessage(w.Reason, w.Message)
		}
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		exit := contract.Exit{Code: -1}
		if st != nil && st.State.Terminated != nil {
			t := st.State.Terminated
			exit.Code = int(t.ExitCode)
			if t.Message != "" && t.ExitCode != 0 {
				// The end of its log, when the container asked for it
				// (FallbackToLogsOnError): the error then quotes it.
				exit.StderrTail = strings.Split(strings.TrimRight(t.Message, "\n"), "\n")
			}
			if t.Reason == "OOMKilled" {
				return podEnded, exit, "OOMKilled"
			}
		} else if pod.Status.Phase == corev1.PodSucceeded {
			exit.Code = 0
		}
		return podEnded, exit, pod.Status.Reason
	case corev1.PodRunning:
		return podRunning, contract.Exit{}, ""
	}
	if st != nil && st.State.Waiting != nil {
		switch r := st.State.Waiting.Reason; r {
		case "InvalidImageName", "ErrImageNeverPull":
			return podBroken, contract.Exit{}, r + ": " + st.State.Waiting.Message
		}
	}
	return podWaiting, contract.Exit{}, ""
}

// runtimeMessage is what the kubelet said about a container that did not
// start: its reason, and the runtime's message when it gave one.
func runtimeMessage(reason, message string) string {
	if message = strings.TrimSpace(message); message != "" {
		return reason + ": " + message
	}
	return reason
}

// taskStatus is the status of the task's container.
func taskStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
