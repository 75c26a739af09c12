package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/contract"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/appruntime"
)

// AppsConfig is what the kubernetes app runtime needs.
type AppsConfig struct {
	Client client.Client
	// Clientset reads the Pods' logs (TailLogs); nil: no logs.
	Clientset kubernetes.Interface
	Placement v1.Placement
	// Endpoint is the manager's host:port as Pods reach it.
	Endpoint       func() string
	Env            []contract.KV
	ServiceAccount string
	RawDataPrefix  string
	Reporter       appruntime.Reporter
	Log            *slog.Logger
	// Holding reports whether this manager runs the executor (holds its
	// lease); only then are apps' objects written. nil: always.
	Holding func() bool
	// Tick is how often every app is reconciled; 0 means a second.
	Tick time.Duration
}

// Apps runs apps as a Deployment and a Service each (appruntime.Runtime).
// One loop creates or updates an app's objects to its target, deletes
// them when the app is deleted, and reports what its Deployment and Pods
// show.
type Apps struct {
	appruntime.SyncGate
	cfg  AppsConfig
	wake chan struct{}

	mu   sync.Mutex
	apps map[appruntime.Key]*kubeApp
}

type kubeApp struct {
	target     appruntime.Target
	removed    bool
	lastReport appruntime.Report
	reported   bool
	// What the proxy reads (appserve.go): the scale decision, the ready
	// Pods as the last reconcile saw them, closed and replaced when they
	// or the app's state change.
	scale    appruntime.Scale
	backends []appruntime.Backend
	changed  chan struct{}
}

var _ appruntime.Runtime = (*Apps)(nil)

// NewApps returns the runtime; Run runs it.
func NewApps(cfg AppsConfig) *Apps {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Holding == nil {
		cfg.Holding = func() bool { return true }
	}
	return &Apps{cfg: cfg, wake: make(chan struct{}, 1), apps: map[appruntime.Key]*kubeApp{}}
}

// Apply records what the app should be; the loop acts on it.
func (r *Apps) Apply(t appruntime.Target) {
	r.mu.Lock()
	a := r.apps[t.Key]
	if a == nil {
		a = &kubeApp{changed: make(chan struct{})}
		r.apps[t.Key] = a
	}
	if a.target.Revision != t.Revision || a.target.Spec == nil {
		a.reported = false
		a.scale.Reset(t.Spec, time.Now())
	}
	a.target, a.removed = t, false
	a.broadcast()
	r.mu.Unlock()
	r.poke()
}

// Remove deletes the app's objects and forgets it.
func (r *Apps) Remove(k appruntime.Key) {
	r.mu.Lock()
	if a := r.apps[k]; a != nil {
		a.removed = true
		a.broadcast()
	} else {
		r.apps[k] = &kubeApp{target: appruntime.Target{Key: k}, removed: true, changed: make(chan struct{})}
	}
	r.mu.Unlock()
	r.poke()
}

func (r *Apps) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run reconciles the apps until ctx ends. The objects stay: the apps run
// on while no manager watches them.
func (r *Apps) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Tick)
	defer t.Stop()
	for {
		r.reconcileAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.wake:
		}
	}
}

func (r *Apps) reconcileAll(ctx context.Context) {
	if !r.cfg.Holding() {
		return
	}
	r.mu.Lock()
	apps := make(map[appruntime.Key]kubeApp, len(r.apps))
	replicas := make(map[appruntime.Key]int32, len(r.apps))
	now := time.Now()
	for k, a := range r.apps {
		apps[k] = kubeApp{target: a.target, removed: a.removed}
		if !a.removed && a.target.Spec != nil {
			replicas[k] = int32(a.scale.Decide(a.target.Spec, len(a.backends), now))
		}
	}
	r.mu.Unlock()
	for k, a := range apps {
		if ctx.Err() != nil {
			return
		}
		if a.removed {
			if err := r.deleteObjects(ctx, k); err != nil {
				r.cfg.Log.Warn("deleting an app's objects (will retry)", "app", k.String(), "err", err)
				continue
			}
			r.mu.Lock()
			if cur := r.apps[k]; cur != nil && cur.removed {
				delete(r.apps, k)
			}
			r.mu.Unlock()
			continue
		}
		rep, err := r.reconcile(ctx, a.target, replicas[k])
		if err != nil {
			r.cfg.Log.Warn("reconciling an app (will retry)", "app", k.String(), "err", err)
			continue
		}
		rep.Key, rep.Revision = k, a.target.Revision
		r.mu.Lock()
		cur := r.apps[k]
		news := cur != nil && cur.target.Revision == a.target.Revision && (!cur.reported || cur.lastReport != rep)
		if news {
			cur.lastReport, cur.reported = rep, true
			cur.broadcast() // a request waiting may now be refused
		}
		r.mu.Unlock()
		if !news {
			continue
		}
		if err := r.cfg.Reporter.Report(ctx, rep); err != nil {
			r.cfg.Log.Warn("recording an app's status (will retry)", "app", k.String(), "err", err)
			r.mu.Lock()
			if cur := r.apps[k]; cur != nil {
				cur.reported = false
			}
			r.mu.Unlock()
		}
	}
}

// reconcile creates or updates t's objects, its Deployment asking for
// replicas Pods (none when the app is stopped: the scale decision is the
// caller's), and reads how the app is. An app whose objects cannot be
// built (no image...) is FAILED.
func (r *Apps) reconcile(ctx context.Context, t appruntime.Target, replicas int32) (appruntime.Report, error) {
	if !t.Active() {
		replicas = 0
	}
	endpoint := ""
	if r.cfg.Endpoint != nil {
		endpoint = r.cfg.Endpoint()
	}
	if endpoint == "" {
		return appruntime.Report{}, errors.New("the manager is not listening yet")
	}
	ns := r.cfg.Placement.NamespaceOf(t.Key.Project, t.Key.Domain)
	dep, svc, err := buildAppObjects(t, appObjectsSpec{Namespace: ns, Replicas: replicas, Env: r.cfg.Env,
		Endpoint: endpoint, ServiceAccount: r.cfg.ServiceAccount, RawDataPrefix: r.cfg.RawDataPrefix})
	if err != nil {
		return appruntime.Report{Status: pb.Status_DEPLOYMENT_STATUS_FAILED, Message: "the app cannot run: " + err.Error()}, nil
	}
	err = upsert(ctx, r.cfg.Client, dep, func() *appsv1.Deployment { return &appsv1.Deployment{} }, func(cur *appsv1.Deployment) bool {
		if sameMeta(dep, cur) && equality.Semantic.DeepDerivative(dep.Spec, cur.Spec) {
			return false
		}
		cur.Labels, cur.Annotations, cur.Spec = dep.Labels, dep.Annotations, dep.Spec
		return true
	})
	if err != nil {
		return appruntime.Report{}, err
	}
	err = upsert(ctx, r.cfg.Client, svc, func() *corev1.Service { return &corev1.Service{} }, func(cur *corev1.Service) bool {
		if sameMeta(svc, cur) && maps.Equal(svc.Spec.Selector, cur.Spec.Selector) && equality.Semantic.DeepDerivative(svc.Spec.Ports, cur.Spec.Ports) {
			return false
		}
		cur.Labels, cur.Annotations = svc.Labels, svc.Annotations
		cur.Spec.Selector, cur.Spec.Ports = svc.Spec.Selector, svc.Spec.Ports
		return true
	})
	if err != nil {
		return appruntime.Report{}, err
	}
	var got appsv1.Deployment
	if err := r.cfg.Client.Get(ctx, client.ObjectKeyFromObject(dep), &got); err != nil {
		return appruntime.Report{}, err
	}
	pods, err := r.pods(ctx, t.Key, t.Revision)
	if err != nil {
		return appruntime.Report{}, err
	}
	everReady := r.sawBackends(t, pods)
	return appStatusOf(t.Active(), everReady, &got, pods), nil
}

// upsert creates obj, or updates the one there when set changed it (an
// unchanged app writes nothing).
func upsert[T client.Object](ctx context.Context, c client.Client, obj T, fresh func() T, set func(T) bool) error {
	cur := fresh()
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, obj)
	}
	if err != nil || !set(cur) {
		return err
	}
	return c.Update(ctx, cur)
}

// sameMeta reports whether cur has want's labels and annotations.
func sameMeta(want, cur client.Object) bool {
	return maps.Equal(want.GetLabels(), cur.GetLabels()) && maps.Equal(want.GetAnnotations(), cur.GetAnnotations())
}

// pods are k's Pods (of revision rev when rev is not 0).
func (r *Apps) pods(ctx context.Context, k appruntime.Key, rev uint64) ([]corev1.Pod, error) {
	sel := maps.Clone(appSelector(k))
	if rev != 0 {
		sel[labelAppRevision] = strconv.FormatUint(rev, 10)
	}
	var list corev1.PodList
	err := r.cfg.Client.List(ctx, &list, client.InNamespace(r.cfg.Placement.NamespaceOf(k.Project, k.Domain)), client.MatchingLabels(sel))
	return list.Items, err
}

// deleteObjects deletes k's Deployment (its Pods go with it) and Service.
func (r *Apps) deleteObjects(ctx context.Context, k appruntime.Key) error {
	nn := types.NamespacedName{Namespace: r.cfg.Placement.NamespaceOf(k.Project, k.Domain), Name: appObjectName(k)}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		obj.SetNamespace(nn.Namespace)
		obj.SetName(nn.Name)
		if err := r.cfg.Client.Delete(ctx, obj, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// Replicas lists the app's Pods.
func (r *Apps) Replicas(k appruntime.Key) []appruntime.Replica {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := r.pods(ctx, k, 0)
	if err != nil {
		r.cfg.Log.Warn("listing an app's Pods", "app", k.String(), "err", err)
		return nil
	}
	out := make([]appruntime.Replica, 0, len(pods))
	for _, p := range pods {
		status := "starting"
		switch {
		case p.DeletionTimestamp != nil:
			status = "stopping"
		case podReady(&p):
			status = "running"
		case p.Status.Phase == corev1.PodFailed:
			status = "crashed"
		}
		if _, _, bad := podTrouble(&p); bad {
			status = "crashed"
		}
		out = append(out, appruntime.Replica{Name: p.Name, Status: status})
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Apps returns the runtime that runs apps beside the driver's actions, in
// the same namespaces, with its own uncached client. Apps get the
// storage's plain variables; its secrets are not put in a Deployment
// (an app on Kubernetes reaches the store with its service account).
func (d *Driver) Apps(rep appruntime.Reporter, rawDataPrefix string) (*Apps, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(d.rest, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes executor: a client for apps: %w", err)
	}
	cs, err := kubernetes.NewForConfig(d.rest)
	if err != nil {
		return nil, fmt.Errorf("kubernetes executor: a client for apps' logs: %w", err)
	}
	var env []contract.KV
	if sa := d.coreOpts.Hooks.Storage; sa != nil {
		env = append(env, sa.Env...)
	}
	return NewApps(AppsConfig{
		Client:         c,
		Clientset:      cs,
		Placement:      d.placement(),
		Endpoint:       d.endpoint,
		Env:            env,
		ServiceAccount: d.cfg.ServiceAccount,
		RawDataPrefix:  rawDataPrefix,
		Reporter:       rep,
		Holding:        d.LeaseHeld,
		Log:            d.log.With("component", "apps"),
	}), nil
}
