package kube

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/logship"
)

// metrics are the driver's Prometheus metrics.
type metrics struct {
	reconciles  prometheus.Counter
	podsCreated prometheus.Counter
	apiWrites   *prometheus.CounterVec
	ended       *prometheus.CounterVec
	takeovers   prometheus.Counter
	collected   prometheus.Counter
	holder      prometheus.GaugeFunc
	core        *attempt.Metrics
	logs        *logship.Metrics
}

func newMetrics(d *Driver) *metrics {
	return &metrics{
		core:        attempt.NewMetrics(),
		reconciles:  prometheus.NewCounter(prometheus.CounterOpts{Name: "flyte_manager_kube_reconciles_total", Help: "TaskAction reconciles by the lease holder."}),
		podsCreated: prometheus.NewCounter(prometheus.CounterOpts{Name: "flyte_manager_kube_pods_created_total", Help: "Attempt Pods created."}),
		apiWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flyte_manager_kube_api_writes_total",
			Help: "Writes the kubernetes executor sent to the API server, by verb and kind."}, []string{"verb", "kind"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flyte_manager_kube_actions_ended_total",
			Help: "Actions the kubernetes executor recorded as ended, by phase."}, []string{"phase"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "flyte_manager_kube_lease_taken_total", Help: "Times this replica took the executor lease."}),
		collected: prometheus.NewCounter(prometheus.CounterOpts{Name: "flyte_manager_kube_gc_deleted_total", Help: "Ended TaskActions deleted by garbage collection."}),
		holder: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flyte_manager_kube_lease_holder",
			Help: "1 while this replica holds the executor lease and reconciles."}, func() float64 {
			if d.lease.Fence() != 0 {
				return 1
			}
			return 0
		}),
		logs: &logship.Metrics{
			Bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "flyte_manager_kube_log_bytes_shipped_total",
				Help: "Bytes of attempts' Pod logs the kubernetes executor stored in blob storage (chunks while containers run, the rest when attempts end)."}),
			Failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "flyte_manager_kube_log_ship_failures_total",
				Help: "Writes of attempts' Pod logs to blob storage that failed (the lines are tried again with the next chunk)."}),
		},
	}
}

// Register adds the metrics to reg.
func (m *metrics) Register(reg prometheus.Registerer) error {
	for _, c := range append([]prometheus.Collector{m.reconciles, m.podsCreated, m.apiWrites, m.ended, m.takeovers, m.collected, m.holder, m.logs.Bytes, m.logs.Failures}, m.core.Collectors()...) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// MetricNames are the names of the metrics the kubernetes executor
// registers (the chart's dashboard and alerts are checked against them).
func MetricNames() []string {
	ch := make(chan *prometheus.Desc, 64)
	reg := prometheus.NewRegistry()
	if err := newMetrics(&Driver{}).Register(reg); err != nil {
		panic(err) // duplicate names: a programming error
	}
	reg.Describe(ch)
	close(ch)
	var names []string
	for d := range ch {
		names = append(names, descName(d))
	}
	return names
}

// descName is the fully qualified name of d (Desc has no accessor for it).
func descName(d *prometheus.Desc) string {
	s := d.String()
	const key = `fqName: "`
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	s = s[i+len(key):]
	return s[:strings.IndexByte(s, '"')]
}

// countingClient counts every write c sends, so operators (and `make
// bench`) see what an action costs the API server.
func countingClient(c client.Client, m *metrics) client.Client { return &counting{Client: c, m: m} }

type counting struct {
	client.Client
	m *metrics
}

func (c *counting) count(verb string, obj client.Object) {
	kind := "unknown"
	if gvk, err := c.GroupVersionKindFor(obj); err == nil {
		kind = gvk.Kind
	}
	c.m.apiWrites.WithLabelValues(verb, kind).Inc()
}

func (c *counting) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.count("create", obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *counting) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *counting) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.count("patch", obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *counting) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.count("delete", obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *counting) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type countingStatus struct {
	client.SubResourceWriter
	c *counting
}

func (s *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.count("update/status", obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.count("patch/status", obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// notOnlyStatus lets through every TaskAction event except an update that
// changed nothing but the status: the driver wrote that status itself.
type notOnlyStatus struct{ predicate.Funcs }

func (notOnlyStatus) Update(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetGeneration() != n.GetGeneration() || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
		len(o.GetFinalizers()) != len(n.GetFinalizers())
}
