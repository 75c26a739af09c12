package kube

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/appruntime"
)

// appStatusOf is how an app is, read from its Deployment (nil when there
// is none) and the Pods it selects: ACTIVE once a replica is available;
// FAILED with IMAGE_PULL_ERROR, CRASH_LOOP or OOM_KILLED when a Pod of
// the current revision shows so; otherwise DEPLOYING, or ACTIVE scaled to
// zero when the Deployment asks for no Pod, or ACTIVE scaling from zero
// when a replica of the revision served before (everReady). want is what
// the runtime wants (false: stopped). Key and Revision are the caller's.
func appStatusOf(want, everReady bool, dep *appsv1.Deployment, pods []corev1.Pod) appruntime.Report {
	if !want {
		return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_STOPPED, Message: "stopped"}
	}
	if dep == nil {
		return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_DEPLOYING, Substate: pb.Status_INITIALIZING,
			Message: "creating the app's Deployment"}
	}
	if n := dep.Status.AvailableReplicas; n > 0 {
		return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_ACTIVE, Substate: pb.Status_RUNNING,
			Message: replicasServe(n), Replicas: uint32(n)}
	}
	for i := range pods {
		if sub, msg, bad := podTrouble(&pods[i]); bad {
			return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_FAILED, Substate: sub, Message: msg}
		}
	}
	if dep.Spec.Replicas != nil && *dep.Spec.Replicas == 0 {
		return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_ACTIVE, Substate: pb.Status_SCALED_TO_ZERO,
			Message: "scaled to zero while idle; the next request starts a replica"}
	}
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "ContainerCreating" {
				return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_DEPLOYING, Substate: pb.Status_PULLING_IMAGE,
					Message: "pulling the app's image"}
			}
		}
	}
	return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_DEPLOYING, Substate: pb.Status_INITIALIZING,
		Message: "starting; waiting for the app to listen on its port"}
}

// podTrouble says what keeps a Pod from ever serving, if anything: an
// image that cannot be pulled, a container that keeps crashing (killed
// for memory, or exiting).
func podTrouble(p *corev1.Pod) (pb.Status_Substate, string, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		last := cs.LastTerminationState.Terminated
		if t := cs.State.Terminated; t != nil {
			last = t
		}
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
				return pb.Status_IMAGE_PULL_ERROR, fmt.Sprintf("the image %s cannot be pulled: %s", cs.Image, oneLine(w.Message)), true
			case "CrashLoopBackOff":
				if last != nil && last.Reason == "OOMKilled" {
					return pb.Status_OOM_KILLED, oomMessage(cs.RestartCount), true
				}
				return pb.Status_CRASH_LOOP, crashMessage(cs.RestartCount, last), true
			}
		}
		if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
			return pb.Status_OOM_KILLED, oomMessage(cs.RestartCount), true
		}
	}
	return pb.Status_SUBSTATE_UNSPECIFIED, "", false
}

func oomMessage(restarts int32) string {
	return fmt.Sprintf("the app ran out of memory and was killed (%d restarts); give it more memory", restarts)
}

func crashMessage(restarts int32, last *corev1.ContainerStateTerminated) string {
	msg := fmt.Sprintf("the app keeps crashing (%d restarts)", restarts)
	if last != nil {
		msg += fmt.Sprintf("; it last exited with code %d", last.ExitCode)
		if m := lastLines(last.Message, 10); m != "" {
			msg += "; last lines:\n" + m
		}
	}
	return msg
}

// oneLine is the last non-empty line of s.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// lastLines are the last n non-empty lines of s (a termination message:
// with FallbackToLogsOnError, the tail of what the container printed).
func lastLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimRight(l, " \r\t"); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

func replicasServe(n int32) string {
	if n == 1 {
		return "1 replica serves"
	}
	return fmt.Sprintf("%d replicas serve", n)
}
