package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/local/process"
)

// podRun is the life of one Pod on the node, from its first sighting to its
// terminal status (or the confirmation of its deletion).
type podRun struct {
	a        *Agent
	pod      *corev1.Pod // the latest copy the run knows, updated by its own writes
	stop     chan struct{}
	stopOnce sync.Once
	// stopGrace is the deletion's grace period in seconds when it is
	// shorter than the Pod's own (kubectl delete --grace-period); -1 if not.
	stopGrace atomic.Int64
	ended     bool // guarded by Agent.mu
}

func newPodRun(a *Agent, pod *corev1.Pod) *podRun {
	r := &podRun{a: a, pod: pod.DeepCopy(), stop: make(chan struct{})}
	r.stopGrace.Store(-1)
	return r
}

// requestStop asks the run to stop its process: the Pod is being deleted
// (deleted, its state then; nil when it is gone or the agent stops).
func (r *podRun) requestStop(deleted *corev1.Pod) {
	r.stopOnce.Do(func() {
		if deleted != nil && deleted.DeletionGracePeriodSeconds != nil {
			if g := *deleted.DeletionGracePeriodSeconds; time.Duration(g)*time.Second < gracePeriod(deleted) {
				r.stopGrace.Store(g)
			}
		}
		close(r.stop)
	})
}

func (r *podRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *podRun) run(ctx context.Context) {
	log := r.a.log.With("pod", r.pod.Namespace+"/"+r.pod.Name)
	if problem := unsupported(r.pod); problem != "" {
		log.Warn("cannot run pod", "problem", problem)
		r.finish(ctx, notStarted(r.pod, "Unsupported", problem))
		return
	}
	if r.a.opts.Runner == RunNoop {
		now := metav1.Now()
		r.writeStatus(ctx, func(s *corev1.PodStatus) { running(s, r.pod, now, make([]int, len(r.pod.Spec.Containers))...) })
		r.finish(ctx, outcome{exitCode: 0, started: now, finished: metav1.Now()})
		return
	}
	inits, err := r.processSpecs(ctx, r.pod.Spec.InitContainers)
	var mains []process.Spec
	if err == nil {
		mains, err = r.processSpecs(ctx, r.pod.Spec.Containers)
	}
	if err != nil {
		log.Warn("cannot create the pod's containers", "err", err)
		r.configError(ctx, err.Error())
		return
	}
	release, ok := r.a.slot(ctx, r.stop, log)
	if !ok {
		r.finish(ctx, notStarted(r.pod, "StartError", "deleted before it started"))
		return
	}
	defer release()
	// Init containers run one after the other, each to its end, before
	// the Pod's containers start; the first that fails fails the Pod.
	for i := range inits {
		c := &r.pod.Spec.InitContainers[i]
		out, ok := r.runInit(ctx, log, c, inits[i])
		if !ok {
			return
		}
		if !out.succeeded() {
			r.end(ctx, func(s *corev1.PodStatus) { initFailed(s, r.pod, c, out) })
			return
		}
	}
	if restarts(r.pod) {
		r.runServing(ctx, log, mains[0])
		return
	}
	r.runContainers(ctx, log, mains)
}

// configError reports containers the agent cannot even create (a Secret
// or ConfigMap their environment names is missing) as a kubelet does: the
// Pod stays Pending, its containers waiting with CreateContainerConfigError
// and why. A kubelet retries until the Pod is deleted; the agent only
// waits for the deletion.
func (r *podRun) configError(ctx context.Context, msg string) {
	r.writeStatus(ctx, func(s *corev1.PodStatus) {
		for _, c := range append(append([]corev1.Container(nil), r.pod.Spec.InitContainers...), r.pod.Spec.Containers...) {
			list := &s.ContainerStatuses
			if slices.ContainsFunc(r.pod.Spec.InitContainers, func(i corev1.Container) bool { return i.Name == c.Name }) {
				list = &s.InitContainerStatuses
			}
			setContainer(list, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: msg}}})
		}
	})
	select {
	case <-r.stop:
	case <-ctx.Done():
	}
	r.end(ctx, func(*corev1.PodStatus) {}) // confirms the deletion
}

// runInit runs init container c to its end; ok is false when the Pod was
// finished instead (it could not start, or it is being deleted).
func (r *podRun) runInit(ctx context.Context, log *slog.Logger, c *corev1.Container, spec process.Spec) (outcome, bool) {
	proc, err := r.a.runners.get(gracePeriod(r.pod)).Start(spec)
	if err != nil {
		log.Warn("cannot start init container", "container", c.Name, "err", err)
		out := notStarted(r.pod, "StartError", startFailure(spec, err))
		r.end(ctx, func(s *corev1.PodStatus) { initFailed(s, r.pod, c, out) })
		return out, false
	}
	started := metav1.Now()
	st := r.follow(ctx, proc)
	log.Info("init container ended", "container", c.Name, "code", st.Code, "signal", st.Signal)
	out := exited(st, r.pod, c, started)
	if r.stopped() || ctx.Err() != nil {
		r.finish(ctx, out)
		return out, false
	}
	if out.succeeded() {
		r.writeStatus(ctx, func(s *corev1.PodStatus) { ended(s, c, true, out) })
	}
	return out, true
}

// runContainers runs the Pod's containers together and finishes the Pod
// when every one has ended: each end is reported as it happens (a sidecar
// may wait for another container), and the Pod fails when any container
// failed.
func (r *podRun) runContainers(ctx context.Context, log *slog.Logger, specs []process.Spec) {
	procs := make([]*process.Process, 0, len(specs))
	for _, spec := range specs {
		proc, err := r.a.runners.get(gracePeriod(r.pod)).Start(spec)
		if err != nil {
			log.Warn("cannot start pod", "err", err)
			for _, p := range procs {
				p.Abort("another container of the pod could not start")
				p.Wait()
			}
			r.finish(ctx, notStarted(r.pod, "StartError", startFailure(spec, err)))
			return
		}
		procs = append(procs, proc)
	}
	started := metav1.Now()
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.Identity().PID
	}
	log.Info("pod running", "pids", pids, "dir", specs[0].Dir)
	r.writeStatus(ctx, func(s *corev1.PodStatus) { running(s, r.pod, started, pids...) })
	type end struct {
		i   int
		out outcome
	}
	ends := make(chan end, len(procs))
	for i, proc := range procs {
		go func() {
			c := &r.pod.Spec.Containers[i]
			var mem *memoryWatch
			if limit := specs[i].Limits.MemoryBytes; limit > 0 && proc.Unenforced() != "" {
				mem = &memoryWatch{}
				go mem.run(proc.Identity().PGID, limit, proc.Done())
			}
			st := r.follow(ctx, proc)
			log.Info("pod process ended", "container", c.Name, "code", st.Code, "signal", st.Signal, "oom", st.OOMKilled, "timedOut", st.TimedOut)
			out := exited(st, r.pod, c, started)
			if mem != nil && mem.exceeded.Load() {
				out.reason, out.exitCode = "OOMKilled", 137
				out.message = "the container's resident memory went over its limit of " + process.FormatBytes(specs[i].Limits.MemoryBytes)
			}
			ends <- end{i, out}
		}()
	}
	var decisive *outcome
	for range procs {
		e := <-ends
		if len(procs) > 1 && !r.stopped() && ctx.Err() == nil {
			r.writeStatus(ctx, func(s *corev1.PodStatus) { ended(s, &r.pod.Spec.Containers[e.i], false, e.out) })
		}
		if decisive == nil || decisive.succeeded() {
			decisive = &e.out
		}
	}
	r.finish(ctx, *decisive)
}

// follow waits for proc to end, stopping it when the Pod is deleted or the
// agent stops, and returns how it ended.
func (r *podRun) follow(ctx context.Context, proc *process.Process) process.ExitStatus {
	select {
	case <-proc.Done():
	case <-r.stop:
		proc.Abort("the pod is being deleted")
		if g := r.stopGrace.Load(); g >= 0 {
			// The runner's grace is the Pod's; the deletion asked for less.
			go killAfter(proc, time.Duration(g)*time.Second)
		}
	case <-ctx.Done():
		proc.Abort("the node agent stops")
	}
	// The agent stopping cuts any grace period short.
	select {
	case <-proc.Done():
	case <-ctx.Done():
		go killAfter(proc, agentStopGrace)
	}
	return proc.Wait()
}

// finish writes the terminal status, or, when the Pod is being deleted,
// confirms the deletion instead (its status no longer matters). When the
// agent stops, it writes nothing: the API server may be gone already.
func (r *podRun) finish(ctx context.Context, out outcome) {
	r.end(ctx, func(s *corev1.PodStatus) { terminated(s, r.pod, out) })
}

// end writes the terminal status mutate makes, as finish does.
func (r *podRun) end(ctx context.Context, mutate func(*corev1.PodStatus)) {
	if ctx.Err() != nil {
		return
	}
	if r.stopped() {
		r.a.confirmDeletion(ctx, r.pod)
		return
	}
	r.writeStatus(ctx, mutate)
}

// processSpecs are the host processes of containers cs of the Pod.
func (r *podRun) processSpecs(ctx context.Context, cs []corev1.Container) ([]process.Spec, error) {
	specs := make([]process.Spec, 0, len(cs))
	for i := range cs {
		spec, err := r.processSpec(ctx, &cs[i])
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", cs[i].Name, err)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// processSpec is the host process of container c.
func (r *podRun) processSpec(ctx context.Context, c *corev1.Container) (process.Spec, error) {
	pod := r.pod
	env, err := containerEnv(ctx, r.a.opts.Client, pod, c, r.a.opts.Env)
	if err != nil {
		return process.Spec{}, err
	}
	podDir := PodDir(r.a.opts.Dir, pod)
	if env, err = secretVolumes(ctx, r.a.opts.Client, pod, c, podDir, env); err != nil {
		return process.Spec{}, err
	}
	vars := envMap(env)
	var args []string
	for _, s := range append(append([]string(nil), c.Command...), c.Args...) {
		args = append(args, expand(s, vars))
	}
	if args, err = emptyDirs(pod, c, podDir, args); err != nil {
		return process.Spec{}, err
	}
	var limits process.Limits
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		limits.MemoryBytes = q.Value()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		limits.CPUMillis = q.MilliValue()
	}
	var timeout time.Duration
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		timeout = time.Duration(*d) * time.Second
	}
	// The container's workingDir, as a container runtime honours it (and
	// creates it); without one, a directory of the Pod's own.
	dir := filepath.Join(podDir, c.Name)
	if c.WorkingDir != "" {
		if !filepath.IsAbs(c.WorkingDir) {
			return process.Spec{}, fmt.Errorf("the container's workingDir %q is not an absolute path", c.WorkingDir)
		}
		dir = c.WorkingDir
	}
	return process.Spec{
		Args:    args,
		Env:     env,
		Dir:     dir,
		LogPath: filepath.Join(podDir, c.Name+".log"),
		Timeout: timeout,
		Limits:  limits,
	}, nil
}

// PodDir is where a Pod's containers work and log below an agent's Dir.
func PodDir(dir string, pod *corev1.Pod) string {
	return filepath.Join(dir, pod.Namespace, pod.Name+"_"+string(pod.UID))
}

// unsupported says why the agent cannot run pod, "" when it can.
func unsupported(pod *corev1.Pod) string {
	switch {
	case restarts(pod) && (len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) > 0):
		return "the test node agent runs Pods with restartPolicy Always only with one container and no init container"
	case pod.Spec.RestartPolicy != corev1.RestartPolicyNever && !restarts(pod):
		return fmt.Sprintf("the test node agent runs only Pods with restartPolicy Never or Always, not %q", pod.Spec.RestartPolicy)
	case len(pod.Spec.Containers) == 0:
		return "the Pod has no container"
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if len(c.Command) == 0 {
			return "the test node agent needs the container's command: it has no image to take an entrypoint from"
		}
		if c.RestartPolicy != nil {
			return "the test node agent does not run sidecar init containers (restartPolicy on an init container)"
		}
	}
	return ""
}

// agentStopGrace is how long a Pod's process has between SIGTERM and
// SIGKILL when the agent stops (not the Pod's grace: tests stop clusters).
const agentStopGrace = 2 * time.Second

// killAfter kills the process group of proc unless it ended within grace.
func killAfter(proc *process.Process, grace time.Duration) {
	select {
	case <-proc.Done():
	case <-time.After(grace):
		_, _ = process.KillOrphan(proc.Identity(), 0)
	}
}

// gracePeriod is the Pod's termination grace period (30 s by default, as in
// Kubernetes).
func gracePeriod(pod *corev1.Pod) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// writeStatus applies mutate to the Pod's status and writes it, re-reading
// the Pod on a conflict. A Pod that is gone (or replaced by another with
// the same name) needs no status any more.
func (r *podRun) writeStatus(ctx context.Context, mutate func(*corev1.PodStatus)) {
	pods := r.a.opts.Client.CoreV1().Pods(r.pod.Namespace)
	cur := r.pod.DeepCopy()
	retryWrites(ctx, r.a.log, "pod status "+r.pod.Namespace+"/"+r.pod.Name, func() (bool, error) {
		mutate(&cur.Status)
		updated, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		switch {
		case err == nil:
			r.pod = updated
			return true, nil
		case apierrors.IsNotFound(err):
			return true, nil
		case apierrors.IsConflict(err):
			fresh, gerr := pods.Get(ctx, r.pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) || (gerr == nil && fresh.UID != r.pod.UID) {
				return true, nil
			}
			if gerr == nil {
				cur = fresh
			}
			return false, err
		default:
			return false, err
		}
	})
}

// confirmDeletion removes a Pod object the agent no longer runs, as a
// kubelet does once the containers of a deleted Pod stopped.
func (a *Agent) confirmDeletion(ctx context.Context, pod *corev1.Pod) {
	zero := int64(0)
	uid := pod.UID
	retryWrites(ctx, a.log, "delete pod "+pod.Namespace+"/"+pod.Name, func() (bool, error) {
		err := a.opts.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero,
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return true, nil // done, gone, or another Pod by that name now
		}
		return false, err
	})
}

// lost fails a Pod that claims to be running on this node while the agent
// has no process for it (the agent restarted).
func (a *Agent) lost(ctx context.Context, pod *corev1.Pod) {
	r := newPodRun(a, pod)
	started := metav1.Now()
	if cs := pod.Status.ContainerStatuses; len(cs) > 0 && cs[0].State.Running != nil {
		started = cs[0].State.Running.StartedAt
	}
	out := outcome{exitCode: 137, reason: "Error", message: "the node agent lost this container's process (it restarted)", started: started, finished: metav1.Now()}
	r.writeStatus(ctx, func(s *corev1.PodStatus) { terminated(s, pod, out) })
}

// retryWrites calls write until it reports done, backing off between
// failures, for at most waitFor or until ctx ends.
func retryWrites(ctx context.Context, log interface{ Warn(string, ...any) }, what string, write func() (done bool, err error)) {
	deadline := time.Now().Add(waitFor)
	backoff := 50 * time.Millisecond
	for {
		done, err := write()
		if done {
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			log.Warn("giving up on an API write", "what", what, "err", err)
			return
		}
		if !apierrors.IsConflict(err) {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// runners hands out process runners by kill grace: a Pod's processes get
// its termination grace period between SIGTERM and SIGKILL.
type runners struct {
	noCgroups bool
	mu        sync.Mutex
	byKill    map[time.Duration]*process.Runner
}

func (rs *runners) get(grace time.Duration) *process.Runner {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.byKill[grace]; ok {
		return r
	}
	if rs.byKill == nil {
		rs.byKill = map[time.Duration]*process.Runner{}
	}
	// KillGrace 0 means the runner's default; a Pod's 0 means at once.
	cfg := process.Config{KillGrace: max(grace, time.Millisecond)}
	if rs.noCgroups {
		cfg.CgroupRoot = "none"
	}
	r := process.NewRunner(cfg)
	rs.byKill[grace] = r
	return r
}
