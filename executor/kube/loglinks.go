package kube

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// parseLogLinks parses executor.kubernetes.logLinks. The configuration was
// validated when it was loaded, so an entry that does not parse here is
// left out (and said so) rather than stopping the executor.
func parseLogLinks(links []config.LogLink, warn func(msg string, args ...any)) []loglink.Template {
	var out []loglink.Template
	for i, l := range links {
		ts, err := l.Templates(loglink.Kubernetes)
		if err != nil {
			warn("ignoring a log link", "key", "executor.kubernetes.logLinks["+strconv.Itoa(i)+"]", "error", err)
			continue
		}
		out = append(out, ts...)
	}
	return out
}

// logLinks renders the links of attempt n of key, which runs in pod: the
// configured ones (else the manager's log endpoint) and the task's own
// (spec's log_links), with its identity and the Pod's own values, the
// finish times once the task's container ended. Links on the manager stay
// rooted paths until a client reads them (loglink.Resolve).
func (d *Driver) logLinks(key store.ActionKey, n int32, pod *corev1.Pod, spec *task.TaskSpec) []*core.TaskLog {
	att := runstate.LogAttempt(key, n)
	v := loglink.IdentityValues(att)
	v[loglink.Namespace] = pod.Namespace
	v[loglink.PodName] = pod.Name
	v[loglink.PodUID] = string(pod.UID)
	v[loglink.ContainerName] = containerName
	v[loglink.NodeName] = pod.Spec.NodeName
	// The Pod's host name: its own when set, else its name (as the
	// container sees it).
	v[loglink.Hostname] = pod.Name
	if pod.Spec.Hostname != "" {
		v[loglink.Hostname] = pod.Spec.Hostname
	}
	started := startedAt(pod)
	if st := taskStatus(pod); st != nil {
		// Without the runtime's scheme ("containerd://"), as log shippers
		// name the container's log stream.
		id := st.ContainerID
		if _, after, ok := strings.Cut(id, "://"); ok {
			id = after
		}
		v[loglink.ContainerID] = id
		if t := st.State.Terminated; t != nil {
			finished := t.FinishedAt.Time
			if finished.IsZero() {
				finished = started
			}
			v[loglink.PodRFC3339FinishTime] = finished.UTC().Format(time.RFC3339)
			v[loglink.PodUnixFinishTime] = strconv.FormatInt(finished.Unix(), 10)
		}
	}
	v[loglink.PodRFC3339StartTime] = started.UTC().Format(time.RFC3339)
	v[loglink.PodUnixStartTime] = strconv.FormatInt(started.Unix(), 10)
	return loglink.ForAttempt(att, d.logTemplates, spec, v)
}
