package nodeagent

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/local/process"
)

// Long-running Pods, as a Deployment makes them.
//
// Addresses: every Pod runs on this host, so two replicas of one app that
// both listen on port 8080 would collide on one address. A Pod that
// declares a container port gets a loopback address of its own in
// 127.1.0.0/16 (Linux routes all of 127.0.0.0/8 to the loopback device) as
// its podIP; its processes find it in status.podIP (the downward API) and
// must listen on it (or on another address of their own), not on 0.0.0.0.
// Other Pods (tasks) have the node's address, 127.0.0.1.
//
// Restarts: a Pod with restartPolicy Always and one container (no init
// containers) runs it again whenever it ends, as a kubelet does: between
// restarts the container waits in CrashLoopBackOff with its last end in
// lastState and restartCount counting, the back-off doubling from
// crashBackoff up to maxCrashBackoff (a kubelet's are 10 s and 5 min: the
// test cluster's are shorter so that tests see a crash loop quickly) and
// starting again after a container ran healthyAfter.
//
// Readiness: the container's readinessProbe (tcpSocket or httpGet, on the
// Pod's address) is tried every probeEvery (not the probe's periodSeconds:
// tests want ready Pods at once); the container and the Pod are Ready
// while it passes. Without a probe, a running container is ready.

const (
	crashBackoff    = 500 * time.Millisecond
	maxCrashBackoff = 8 * time.Second
	healthyAfter    = 10 * time.Second
	probeEvery      = 200 * time.Millisecond
)

// ipPool hands out the Pods' loopback addresses.
type ipPool struct {
	mu   sync.Mutex
	used map[string]bool
	next uint32
}

// take returns a free address, "" when all 65534 are taken.
func (p *ipPool) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used == nil {
		p.used = map[string]bool{}
	}
	for range 1 << 16 {
		p.next = (p.next + 1) % (1 << 16)
		if p.next == 0 || p.next == 1<<16-1 {
			continue
		}
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, 127<<24|1<<16|p.next)
		if s := ip.String(); !p.used[s] {
			p.used[s] = true
			return s
		}
	}
	return ""
}

func (p *ipPool) give(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.used, ip)
}

// declaresPorts reports whether a container of pod declares a port.
func declaresPorts(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			return true
		}
	}
	return false
}

// restarts reports whether pod's container runs again when it ends.
func restarts(pod *corev1.Pod) bool { return pod.Spec.RestartPolicy == corev1.RestartPolicyAlways }

// runServing runs the Pod's one container, again whenever it ends, until
// the Pod is deleted or the agent stops.
func (r *podRun) runServing(ctx context.Context, log *slog.Logger, spec process.Spec) {
	c := &r.pod.Spec.Containers[0]
	var restartCount int32
	var last *corev1.ContainerStateTerminated
	backoff := crashBackoff
	for {
		proc, err := r.a.runners.get(gracePeriod(r.pod)).Start(spec)
		if err != nil {
			log.Warn("cannot start pod", "err", err)
			r.finish(ctx, notStarted(r.pod, "StartError", startFailure(spec, err)))
			return
		}
		started := metav1.Now()
		pid := proc.Identity().PID
		log.Info("pod container running", "pid", pid, "restarts", restartCount, "podIP", podIP(r.pod))
		ready := c.ReadinessProbe == nil
		r.writeStatus(ctx, func(s *corev1.PodStatus) { serving(s, r.pod, started, pid, ready, restartCount, last) })
		tick := time.NewTicker(probeEvery)
	watch:
		for {
			select {
			case <-proc.Done():
				break watch
			case <-r.stop:
				break watch
			case <-ctx.Done():
				break watch
			case <-tick.C:
				if ok := probe(ctx, r.pod, c); ok != ready {
					ready = ok
					log.Info("pod readiness", "ready", ready)
					r.writeStatus(ctx, func(s *corev1.PodStatus) { serving(s, r.pod, started, pid, ready, restartCount, last) })
				}
			}
		}
		tick.Stop()
		st := r.follow(ctx, proc)
		out := exited(st, r.pod, c, started)
		if r.stopped() || ctx.Err() != nil {
			r.finish(ctx, out)
			return
		}
		log.Info("pod container ended; restarting it", "code", st.Code, "signal", st.Signal, "oom", st.OOMKilled, "backoff", backoff)
		if time.Since(started.Time) > healthyAfter {
			backoff = crashBackoff
		}
		restartCount++
		last = terminatedState(out, fmt.Sprint(containerID(pid)))
		r.writeStatus(ctx, func(s *corev1.PodStatus) { crashLooping(s, r.pod, backoff, restartCount, last) })
		select {
		case <-time.After(backoff):
		case <-r.stop:
			r.finish(ctx, out)
			return
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, maxCrashBackoff)
	}
}

// probe runs c's readiness probe once against the Pod's address.
func probe(ctx context.Context, pod *corev1.Pod, c *corev1.Container) bool {
	p := c.ReadinessProbe
	if p == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	switch {
	case p.TCPSocket != nil:
		port, ok := probePort(c, p.TCPSocket.Port.IntValue(), p.TCPSocket.Port.String())
		if !ok {
			return false
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(podIP(pod), strconv.Itoa(port)))
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	case p.HTTPGet != nil:
		port, ok := probePort(c, p.HTTPGet.Port.IntValue(), p.HTTPGet.Port.String())
		if !ok {
			return false
		}
		u := "http://" + net.JoinHostPort(podIP(pod), strconv.Itoa(port)) + p.HTTPGet.Path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	}
	return false // exec probes: not supported, never ready
}

// probePort resolves a probe's port: a number, or a container port's name.
func probePort(c *corev1.Container, n int, name string) (int, bool) {
	if n > 0 {
		return n, true
	}
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}

// serving marks the Pod Running with its container running since started,
// ready or not.
func serving(s *corev1.PodStatus, pod *corev1.Pod, started metav1.Time, pid int, ready bool, restartCount int32, last *corev1.ContainerStateTerminated) {
	s.Phase = corev1.PodRunning
	setAddresses(s, pod)
	if s.StartTime == nil {
		s.StartTime = &started
	}
	now := metav1.Now()
	setCondition(s, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", now)
	setCondition(s, corev1.PodInitialized, corev1.ConditionTrue, "", now)
	st, reason := corev1.ConditionTrue, ""
	if !ready {
		st, reason = corev1.ConditionFalse, "ContainersNotReady"
	}
	setCondition(s, corev1.ContainersReady, st, reason, now)
	setCondition(s, corev1.PodReady, st, reason, now)
	c := &pod.Spec.Containers[0]
	yes := true
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ContainerID: containerID(pid), Ready: ready, Started: &yes,
		RestartCount: restartCount, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
	if last != nil {
		cs.LastTerminationState = corev1.ContainerState{Terminated: last}
	}
	setContainer(&s.ContainerStatuses, cs)
}

// crashLooping marks the Pod's container waiting to be restarted after it
// ended (last).
func crashLooping(s *corev1.PodStatus, pod *corev1.Pod, backoff time.Duration, restartCount int32, last *corev1.ContainerStateTerminated) {
	s.Phase = corev1.PodRunning
	setAddresses(s, pod)
	now := metav1.Now()
	setCondition(s, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", now)
	setCondition(s, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", now)
	c := &pod.Spec.Containers[0]
	no := false
	setContainer(&s.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: &no, RestartCount: restartCount,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, c.Name, pod.Name)}},
		LastTerminationState: corev1.ContainerState{Terminated: last}})
}

// terminatedState is out as a container's terminated state.
func terminatedState(out outcome, id string) *corev1.ContainerStateTerminated {
	reason := out.reason
	if reason == "" {
		reason = "Completed"
		if out.exitCode != 0 {
			reason = "Error"
		}
	}
	return &corev1.ContainerStateTerminated{ExitCode: out.exitCode, Signal: out.signal, Reason: reason, Message: out.message,
		StartedAt: out.started, FinishedAt: out.finished, ContainerID: id}
}
