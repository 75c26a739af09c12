package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/lease"
	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Driver is the kubernetes executor: every action is a TaskAction and every
// attempt a Pod, reconciled by a controller-runtime controller in the
// manager's process. It implements runstate.Executor.
//
// The database stays the record of truth. Every status change is decided
// and written by the attempt core first (fenced by the executor lease, so
// one manager replica reconciles while the others serve the API); the
// TaskAction's status is then a projection of the action's row, written at
// most once per pass. Reconciles are triggered by what changed (a TaskAction
// or one of its Pods, an action created, aborted or changed through the API)
// and requeued only with a reason (a retry's backoff, a timeout, a
// conflict); nothing polls every action.
type Driver struct {
	state    *runstate.Service
	core     *attempt.Core
	coreOpts attempt.Options // what core was built with (WithHooks rebuilds it)
	cfg      config.KubernetesExecutor
	// logTemplates are executor.kubernetes.logLinks, rendered per Pod.
	logTemplates []loglink.Template
	rest         *rest.Config
	endpoint     func() string
	lockDir      string
	log          *slog.Logger
	metrics      *metrics

	lease   *lease.Keeper
	slots   *attempt.Slots // runs' max_action_concurrency; no global limit
	trigger chan event.GenericEvent
	rescan  chan struct{}

	// Set by Run before the controller starts.
	client    client.Client // cached reads, counted writes
	reader    client.Reader // uncached reads
	clientset kubernetes.Interface
	events    events.EventRecorder
	cache     cache.Cache

	mu         sync.Mutex
	keys       map[types.NamespacedName]store.ActionKey // unfinished actions by TaskAction, which may not exist (yet, or any more)
	namespaces map[string]bool                          // namespaces known to exist
	written    map[types.UID]writtenStatus              // the status last written per TaskAction (writeStatus)
	own        versions                                 // resource versions of this driver's own writes (write)
	podEvents  map[store.ActionKey]*podEventsSeen       // Pod events already in each action's history (podevents.go)
	synced     bool                                     // the caches synced and the lease was tried once

	// Log shipping (logship.go): the shippers' context while the driver
	// runs, the attempts shipped, how long a line may wait to be stored.
	shipCtx  context.Context
	shipping map[shipKey]bool
	shippers sync.WaitGroup
	logFlush time.Duration
}

var _ runstate.Executor = (*Driver)(nil)

var (
	setLoggerOnce      sync.Once
	skipNameValidation = true
)

// RESTConfig loads the cluster's client configuration: the kubeconfig
// file, else in-cluster credentials, else $KUBECONFIG or ~/.kube/config.
func RESTConfig(cfg config.KubernetesExecutor) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		rules.ExplicitPath = cfg.Kubeconfig
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}).ClientConfig()
	if err != nil {
		if cfg.Kubeconfig == "" {
			if ic, ierr := rest.InClusterConfig(); ierr == nil {
				rc, err = ic, nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("executor.kubernetes: no cluster to talk to: %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	rc.UserAgent = "flyte-manager"
	return rc, nil
}

// New builds the driver over state (runstate.New calls it). lockDir is a
// directory of this manager's own (its home): a restarted manager that
// finds its dead predecessor's lease there takes it at once.
func New(state *runstate.Service, rc *rest.Config, cfg config.KubernetesExecutor, lockDir string, endpoint func() string, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	d := &Driver{
		state:      state,
		cfg:        cfg,
		rest:       rc,
		endpoint:   endpoint,
		lockDir:    lockDir,
		log:        log.With("component", "executor", "executor", "kubernetes"),
		trigger:    make(chan event.GenericEvent, 8192),
		rescan:     make(chan struct{}, 1),
		keys:       map[types.NamespacedName]store.ActionKey{},
		namespaces: map[string]bool{},
		written:    map[types.UID]writtenStatus{},
		podEvents:  map[store.ActionKey]*podEventsSeen{},
		own:        versions{seen: map[int64]struct{}{}},
	}
	d.logTemplates = parseLogLinks(cfg.LogLinks, d.log.Warn)
	d.slots = attempt.NewSlots(0)
	d.lease = lease.New(state.Leases(), lockDir, cfg.LeaseTTL, d.log, leaseEvents{d})
	d.coreOpts = attempt.Options{
		SystemRetries: uint32(cfg.SystemRetries),
		SystemBackoff: machine.Backoff{Base: time.Second, Factor: 2, Cap: time.Minute},
		Fence:         d.lease.Fence,
		Cluster:       clusterName(cfg),
		Slots:         d.slots,
		Requeue:       d.requeue,
		Ended:         d.forgetPodEvents,
		Log:           d.log,
	}
	d.metrics = newMetrics(d)
	d.coreOpts.Metrics = d.metrics.core
	d.core = attempt.New(state, d.coreOpts)
	return d
}

// clusterName is what attempts' history calls the cluster: the
// kubeconfig context the manager uses, or "kubernetes" (in-cluster, or the
// kubeconfig's current context).
func clusterName(cfg config.KubernetesExecutor) string {
	if cfg.Context != "" {
		return cfg.Context
	}
	return "kubernetes"
}

// WithHooks makes the cache and secret services join the planning of
// every attempt; call it before Start.
func (d *Driver) WithHooks(h attempt.Hooks) *Driver {
	d.coreOpts.Hooks = h
	d.core = attempt.New(d.state, d.coreOpts)
	return d
}

// Submit says key was created QUEUED (runstate.Executor).
func (d *Driver) Submit(key store.ActionKey) { d.poke(key) }

// Abort says key was marked for abort (runstate.Executor).
func (d *Driver) Abort(key store.ActionKey) { d.poke(key) }

// poke asks for a reconcile of key's TaskAction, which may not exist yet.
func (d *Driver) poke(key store.ActionKey) {
	name := d.nameOf(key)
	d.mu.Lock()
	d.keys[name] = key
	d.mu.Unlock()
	select {
	case d.trigger <- event.GenericEvent{Object: &v1.TaskAction{ObjectMeta: metaOf(name)}}:
	default:
		d.askRescan() // the queue is full: the scan finds it
	}
}

// requeue pokes key after delay (attempt.Options.Requeue). A retry's next
// attempt starts in a pass of its own: the change feed skips this driver's
// writes, and no object changed that would trigger one.
func (d *Driver) requeue(key store.ActionKey, delay time.Duration) {
	if delay <= 0 {
		d.poke(key)
		return
	}
	time.AfterFunc(delay, func() { d.poke(key) })
}

func (d *Driver) pokeAll(keys []store.ActionKey) {
	for _, k := range keys {
		d.poke(k)
	}
}

func (d *Driver) askRescan() {
	select {
	case d.rescan <- struct{}{}:
	default:
	}
}

// keyFor is the unfinished action a TaskAction that does not exist stands
// for: not yet created, or deleted behind the manager's back.
func (d *Driver) keyFor(name types.NamespacedName) (store.ActionKey, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, ok := d.keys[name]
	return k, ok
}

// known reports whether key was poked and has not ended.
func (d *Driver) known(key store.ActionKey) bool {
	_, ok := d.keyFor(d.nameOf(key))
	return ok
}

// forget drops an ended action's entry.
func (d *Driver) forget(name types.NamespacedName) {
	d.mu.Lock()
	delete(d.keys, name)
	d.mu.Unlock()
}

// Scheme is what the driver's clients understand: the built-in kinds and
// TaskActions.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Run runs the driver until ctx ends: the controller, the executor lease,
// the change feed and garbage collection. It fails at once when the
// cluster cannot be reached or lacks the TaskAction CRD.
func (d *Driver) Run(ctx context.Context) error {
	mgr, err := d.newManager()
	if err != nil {
		return err
	}
	lock, err := lease.LockDir(filepath.Join(d.lockDir, "kubernetes"), ".executor.lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := mgr.Add(manager.RunnableFunc(d.background)); err != nil {
		return err
	}
	d.log.Info("kubernetes executor starting", "host", d.rest.Host, "namespace", d.describeNamespace())
	err = mgr.Start(ctx)
	release, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	d.lease.Release(release)
	if err != nil {
		return fmt.Errorf("kubernetes executor: %w", err)
	}
	return nil
}

func (d *Driver) describeNamespace() string {
	if d.cfg.NamespacePerProject {
		return "<project>-<domain>"
	}
	return d.cfg.Namespace
}

// newManager builds the controller-runtime manager and the controller.
func (d *Driver) newManager() (manager.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	managed := labels.SelectorFromSet(labels.Set{LabelManaged: managedBy})
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: managed}}}
	if !d.cfg.NamespacePerProject {
		opts.DefaultNamespaces = map[string]cache.Config{d.cfg.Namespace: {}}
	}
	logger := logr.FromSlogHandler(d.log.Handler())
	setLoggerOnce.Do(func() { ctrl.SetLogger(logger) }) // controller-runtime's global logger, used before a manager's
	mgr, err := ctrl.NewManager(d.rest, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Cache:                  opts,
		Metrics:                metricsserver.Options{BindAddress: "0"}, // our metrics are on the manager's port
		HealthProbeBindAddress: "0",
		LeaderElection:         false, // the executor lease elects, and fences the database writes too
		// Names are unique per manager; several drivers share a process
		// only in tests (a failover between two replicas).
		Controller: ctrlconfig.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes executor: %w", err)
	}
	d.client = countingClient(mgr.GetClient(), d.metrics)
	d.reader = mgr.GetAPIReader()
	d.cache = mgr.GetCache()
	d.events = mgr.GetEventRecorder("flyte-manager")
	if d.clientset, err = kubernetes.NewForConfig(d.rest); err != nil {
		return nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("taskaction").
		For(&v1.TaskAction{}, builder.WithPredicates(notOnlyStatus{})).
		Owns(&corev1.Pod{}).
		WatchesRawSource(source.Channel(d.trigger, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 32,
			// Retries after errors back off, but never past 30 s: an action
			// must not sit for minutes because its reconciles failed a few
			// times in a row (the default grows to 16 minutes).
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](10*time.Millisecond, 30*time.Second),
		}).
		Complete(d)
	if err != nil {
		return nil, fmt.Errorf("kubernetes executor: %w", err)
	}
	return mgr, nil
}

// background runs beside the controller once the caches synced: the lease,
// the change feed, rescans and garbage collection.
func (d *Driver) background(ctx context.Context) error {
	// The first scan needs the TaskActions the cluster has.
	if !d.cache.WaitForCacheSync(ctx) {
		return errors.New("kubernetes executor: the caches did not sync")
	}
	d.lease.Step(ctx)
	d.mu.Lock()
	d.synced = true
	d.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer d.startShipping(ctx)()
	stop := make(chan struct{})
	defer close(stop) // before the wait: it stops the lease's loop
	wg.Add(3)
	go func() { defer wg.Done(); d.lease.Run(ctx, stop) }()
	go func() { defer wg.Done(); d.followChanges(ctx) }()
	go func() { defer wg.Done(); d.collectGarbage(ctx) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.rescan:
			if d.lease.Fence() == 0 {
				continue
			}
			if err := d.scan(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("scanning unfinished actions (will retry)", "err", err)
				time.AfterFunc(time.Second, d.askRescan)
			}
		}
	}
}

// scan pokes every unfinished action and every TaskAction: after taking
// the lease, or when a change notification may have been missed.
func (d *Driver) scan(ctx context.Context) error {
	if err := d.core.Scan(ctx, func(a *store.Action) { d.poke(a.ActionKey) }); err != nil {
		return err
	}
	var list v1.TaskActionList
	if err := d.client.List(ctx, &list); err != nil {
		return err
	}
	for i := range list.Items {
		ta := &list.Items[i]
		select {
		case d.trigger <- event.GenericEvent{Object: ta}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// followChanges pokes the actions that other managers create or change
// (a run accepted by a standby replica, an abort sent to it), as the
// change log reports them.
func (d *Driver) followChanges(ctx context.Context) {
	for ctx.Err() == nil {
		sub := d.state.Hub().Subscribe(runstate.Matching(func(c store.Change) bool {
			// An action created terminal (a trace, a cache hit) needs no
			// TaskAction: the row the change came with says so without a read.
			return c.Kind == store.KindAction && !(c.Op == store.ChangeAdded && c.Action != nil && c.Action.Phase.Terminal())
		}))
		for open := true; open; {
			select {
			case <-ctx.Done():
				sub.Close()
				return
			case c, ok := <-sub.C:
				if !ok {
					open = false
					break
				}
				// This replica's own writes, and actions it was told about
				// already (Submit), need no second look.
				if d.lease.Fence() != 0 && !d.own.has(c.ObjectResourceVersion) && !(c.Op == store.ChangeAdded && d.known(c.Key)) {
					d.poke(c.Key)
				}
			}
		}
		sub.Close()
		d.askRescan() // the subscription fell behind: look at everything
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// Ready reports whether the driver is ready (for /readyz): its caches
// synced. A standby replica is ready: it serves the API in full.
func (d *Driver) Ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.synced {
		return errors.New("the kubernetes executor has not synced with the cluster yet")
	}
	return nil
}

// LeaseStatus says whether this replica reconciles or stands by.
func (d *Driver) LeaseStatus() string { return d.lease.Describe() }

// LeaseHeld reports whether this manager holds the executor lease and is
// not paused: the one manager that also fires triggers.
func (d *Driver) LeaseHeld() bool { return d.lease.Fence() != 0 && !d.lease.Paused() }

// leaseEvents is the driver's side of the lease.
type leaseEvents struct{ d *Driver }

func (e leaseEvents) Taken(token int64, prev store.Lease) {
	e.d.log.Info("took the executor lease: this replica reconciles TaskActions", "token", token, "previous", prev.Holder)
	e.d.metrics.takeovers.Inc()
	e.d.askRescan()
}

func (e leaseEvents) Lost(token int64, why string) {
	e.d.log.Error("lost the executor lease: this replica stands by", "token", token, "why", why)
	e.d.slots.DropAllWaiting() // the next holder finds them with its scan
}

func (e leaseEvents) Paused(token int64, why string) {
	e.d.log.Error("the executor lease cannot be renewed: reconciling pauses until it can", "token", token, "why", why)
}

func (e leaseEvents) Resumed(token int64) {
	e.d.log.Warn("the executor lease is renewed again: reconciling resumes", "token", token)
	e.d.askRescan()
}

// versions is a bounded set of action resource versions.
type versions struct {
	mu   sync.Mutex
	seen map[int64]struct{}
}

func (v *versions) add(rv int64) {
	v.mu.Lock()
	if len(v.seen) >= maxRemembered {
		clear(v.seen) // forgetting costs a redundant reconcile, no more
	}
	v.seen[rv] = struct{}{}
	v.mu.Unlock()
}

// has reports whether rv is one of ours, forgetting it: each version is
// reported by the change feed once.
func (v *versions) has(rv int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.seen[rv]
	delete(v.seen, rv)
	return ok
}
