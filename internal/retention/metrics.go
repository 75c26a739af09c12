package retention

import "github.com/prometheus/client_golang/prometheus"

// metrics count what the collector freed.
type metrics struct {
	passes  *prometheus.CounterVec
	runs    prometheus.Counter
	objects prometheus.Counter
	bytes   *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_gc_passes_total",
			Help: "Retention collector passes that deleted something (not dry runs), by result: ok or error.",
		}, []string{"result"}),
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_gc_runs_deleted_total",
			Help: "Runs the retention collector deleted.",
		}),
		objects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_gc_objects_deleted_total",
			Help: "Objects the retention collector deleted from storage (run data, code bundles, inputs).",
		}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_gc_bytes_freed_total",
			Help: "Bytes the retention collector freed, by where: storage or workdir (attempt directories and logs).",
		}, []string{"where"}),
	}
	// Every series at zero, so that rate() and increase() see the first one.
	for _, r := range []string{"ok", "error"} {
		m.passes.WithLabelValues(r)
	}
	for _, w := range []string{"storage", "workdir"} {
		m.bytes.WithLabelValues(w)
	}
	return m
}

func (m *metrics) record(rep Report, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.passes.WithLabelValues(result).Inc()
	m.runs.Add(float64(rep.Runs))
	m.objects.Add(float64(rep.Objects))
	m.bytes.WithLabelValues("storage").Add(float64(rep.Bytes))
	m.bytes.WithLabelValues("workdir").Add(float64(rep.DirBytes))
}

// Collectors are the collector's Prometheus metrics, to register once.
func (c *Collector) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.m.passes, c.m.runs, c.m.objects, c.m.bytes}
}
