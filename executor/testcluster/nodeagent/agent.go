// Package nodeagent is the test cluster's kubelet: one node whose Pods run as
// local processes.
//
// The agent registers its Node, binds every unscheduled Pod to it (envtest
// has no scheduler, and there is only one node), and watches the Pods bound
// to it. A Pod's init containers run one after the other, each to its end,
// then its containers run together, each as a host process through the
// local executor's process runner (own process group and working directory,
// stdout/stderr in a log file, the memory limit enforced where the host gives
// a cgroup, else sampled). The agent reports the Pod's status as a kubelet
// does: Running with the containers' start, each container's end as it
// happens when there are several (a sidecar may wait for another), then
// Succeeded or Failed when all ended (Failed when any failed, or when an init
// container did: the containers then never start). Deleting a Pod stops its
// processes (SIGTERM, then SIGKILL after the Pod's termination grace period,
// or the deletion's when shorter) and then removes the object, as a kubelet
// confirms a deletion. Stopping the agent kills every process within a
// couple of seconds.
//
// Volumes: secret volumes are written under the Pod's directory and their
// mount paths mapped through the environment; emptyDir volumes are the
// Pod's directories bound at their mount paths in a private mount namespace
// per process (root only; volumes.go). Long-running Pods (serve.go): a Pod
// that declares a container port gets a loopback address of its own as
// podIP; a Pod with restartPolicy Always and one container is restarted
// with a crash-loop back-off, and its readinessProbe decides when it is
// Ready. What it does not do: other restarts (OnFailure, sidecar init
// containers), images (the container's command is found on PATH of the
// host), other volumes, liveness and exec probes.
// Of the kubelet's API it serves container logs (kubelet.go), so `kubectl
// logs` works. A memory limit is enforced by the runner's cgroup where the
// host gives one, else by sampling RSS (memory.go).
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Runner modes.
const (
	// RunProcess runs each Pod's container command as a host process.
	RunProcess = "process"
	// RunNoop starts nothing: every Pod goes Running, then Succeeded with
	// exit code 0. For benchmarks of the control plane.
	RunNoop = "noop"
)

// DefaultNodeName is the node an agent registers when Options.NodeName is empty.
const DefaultNodeName = "flyte-node-0"

// Options configure an Agent.
type Options struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// NodeName is the Node the agent registers and runs Pods for;
	// DefaultNodeName when empty.
	NodeName string
	// Dir holds the Pods' working directories and logs:
	// <Dir>/<namespace>/<pod>_<uid>/<container>/ and <container>.log.
	Dir string
	// Runner is RunProcess (the default when empty) or RunNoop.
	Runner string
	// Env is the environment every process starts from, before its
	// container's env. Empty means PATH, HOME and LANG of the agent.
	Env []string
	// NoCgroups runs processes without cgroups even where the host gives
	// them (as on a host that does not): memory limits are then enforced
	// by sampling RSS (memory.go).
	NoCgroups bool
	// MaxRunning bounds the Pod processes running at once (0: no bound);
	// the others wait, Pending, for a slot, as on a node whose kubelet
	// starts containers one image pull at a time. It keeps a burst of
	// Pods from starving every process of CPU on a small machine.
	MaxRunning int
	// Log receives the agent's own records; slog.Default() when nil.
	Log *slog.Logger
}

// Agent runs the Pods of one node.
type Agent struct {
	opts    Options
	log     *slog.Logger
	runners runners

	slots chan struct{} // one per running process when MaxRunning > 0
	ips   ipPool        // the Pods' own addresses (serve.go)

	mu sync.Mutex
	// pods are the Pods this agent took on, kept after their run ended
	// until the object is deleted, so that a late event about a Pod the
	// agent ran is never mistaken for a Pod it lost.
	pods map[types.UID]*podRun
	wg   sync.WaitGroup // one per podRun goroutine
}

// New checks opts and returns an agent; Run starts it.
func New(opts Options) (*Agent, error) {
	if opts.Client == nil {
		return nil, errors.New("nodeagent: no API client")
	}
	if opts.NodeName == "" {
		opts.NodeName = DefaultNodeName
	}
	switch opts.Runner {
	case "":
		opts.Runner = RunProcess
	case RunProcess, RunNoop:
	default:
		return nil, fmt.Errorf("nodeagent: unknown runner %q (want %q or %q)", opts.Runner, RunProcess, RunNoop)
	}
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("nodeagent: the directory %q must be an absolute path", opts.Dir)
	}
	if len(opts.Env) == 0 {
		opts.Env = agentEnv()
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	var slots chan struct{}
	if opts.MaxRunning > 0 {
		slots = make(chan struct{}, opts.MaxRunning)
	}
	return &Agent{
		slots:   slots,
		opts:    opts,
		runners: runners{noCgroups: opts.NoCgroups},
		log:     opts.Log.With("node", opts.NodeName),
		pods:    map[types.UID]*podRun{},
	}, nil
}

// agentEnv is the part of the agent's own environment a process needs to
// find commands and a home.
func agentEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// slot waits for room to run one more process (Options.MaxRunning),
// saying so in log when it must wait; ok is false when stop or ctx ended
// the wait first.
func (a *Agent) slot(ctx context.Context, stop <-chan struct{}, log *slog.Logger) (release func(), ok bool) {
	if a.slots == nil {
		return func() {}, true
	}
	release = func() { <-a.slots }
	select {
	case a.slots <- struct{}{}:
		return release, true
	default:
	}
	log.Info("pod waiting for a slot", "maxRunning", cap(a.slots))
	select {
	case a.slots <- struct{}{}:
		return release, true
	case <-stop:
	case <-ctx.Done():
	}
	return nil, false
}

// NodeName is the node the agent runs Pods for.
func (a *Agent) NodeName() string { return a.opts.NodeName }

// Run registers the node and serves its Pods until ctx ends; ready (may be
// nil) is called once both informers have synced. When Run returns, every
// process it started has been stopped.
func (a *Agent) Run(ctx context.Context, ready func()) error {
	if err := os.MkdirAll(a.opts.Dir, 0o755); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kubeletPort, err := a.serveKubelet(ctx)
	if err != nil {
		return err
	}
	if err := registerNode(ctx, a.opts.Client, a.opts.NodeName, kubeletPort); err != nil {
		return err
	}

	bound := informers.NewSharedInformerFactoryWithOptions(a.opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + a.opts.NodeName }))
	podInf := bound.Core().V1().Pods().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observe(ctx, obj) },
		UpdateFunc: func(_, obj any) { a.observe(ctx, obj) },
		DeleteFunc: func(obj any) { a.gone(obj) },
	}); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	sched := newScheduler(a.opts.Client, a.opts.NodeName, a.log)
	unbound := informers.NewSharedInformerFactoryWithOptions(a.opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" }))
	if _, err := unbound.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sched.enqueue(obj) },
		UpdateFunc: func(_, obj any) { sched.enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	bound.Start(ctx.Done())
	unbound.Start(ctx.Done())
	go sched.run(ctx)
	for typ, ok := range bound.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("nodeagent: the %v informer did not sync", typ)
		}
	}
	unbound.WaitForCacheSync(ctx.Done())
	a.log.Info("node agent ready", "runner", a.opts.Runner, "dir", a.opts.Dir)
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	sched.shutdown()
	bound.Shutdown()
	unbound.Shutdown()
	a.stopAll()
	return nil
}

// observe takes on a new Pod, or passes a deletion to the Pod's run.
func (a *Agent) observe(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != a.opts.NodeName {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if run, ok := a.pods[pod.UID]; ok {
		if pod.DeletionTimestamp != nil {
			run.requestStop(pod)
		}
		return
	}
	if pod.DeletionTimestamp != nil {
		// Not ours to run any more; confirm the deletion unless a run of
		// ours is in flight (then the run confirms it when it ends).
		go a.confirmDeletion(ctx, pod)
		return
	}
	if terminal(pod) {
		return
	}
	if pod.Status.Phase == corev1.PodRunning {
		// Running by another agent's hand (a restarted agent lost its
		// process): the container is gone.
		go a.lost(ctx, pod)
		return
	}
	run := newPodRun(a, pod)
	ip := ""
	if declaresPorts(pod) {
		ip = a.ips.take()
		run.pod.Status.PodIP = ip
	}
	a.pods[pod.UID] = run
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		run.run(ctx)
		if ip != "" {
			a.ips.give(ip)
		}
		a.mu.Lock()
		run.ended = true
		a.mu.Unlock()
	}()
}

// gone handles a Pod object that was removed (force-deleted, or deleted by
// the agent itself after its run ended).
func (a *Agent) gone(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if run, ok := a.pods[pod.UID]; ok {
		run.requestStop(nil)
		delete(a.pods, pod.UID)
	}
}

// stopAll stops every running Pod process and waits for the runs to end.
func (a *Agent) stopAll() {
	a.mu.Lock()
	for _, run := range a.pods {
		run.requestStop(nil)
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// Running reports how many Pods the agent is running now.
func (a *Agent) Running() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, run := range a.pods {
		if !run.ended {
			n++
		}
	}
	return n
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// waitFor is how long the agent keeps retrying an API write that fails for
// reasons other than a conflict (the API server restarting, a loaded machine).
const waitFor = 2 * time.Minute
