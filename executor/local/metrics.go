package local

import (
	"github.com/prometheus/client_golang/prometheus"

	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/phase"
)

// metrics are the driver's Prometheus collectors; RegisterMetrics hands
// them to a registry.
type metrics struct {
	started   prometheus.Counter
	ended     *prometheus.CounterVec
	orphans   prometheus.Counter
	takeovers prometheus.Counter
	gauges    []prometheus.Collector
}

func newMetrics(d *Driver) *metrics {
	m := &metrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_executor_attempts_started_total",
			Help: "Attempt processes the local executor started.",
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_executor_attempts_ended_total",
			Help: "Attempts the local executor recorded as ended, by what followed: succeeded, failed, timed_out, aborted or retried.",
		}, []string{"result"}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_executor_orphans_recovered_total",
			Help: "Attempts found running after a restart and recovered (stopped, then retried or failed).",
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_executor_lease_takeovers_total",
			Help: "Times this manager took the executor lease over from another manager that had stopped renewing it.",
		}),
	}
	m.gauges = []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flyte_manager_executor_lease_holder",
			Help: "1 while this manager holds the executor lease (runs attempts), 0 on standby.",
		}, func() float64 {
			if d.lease.Fence() != 0 {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flyte_manager_executor_attempts_running",
			Help: "Attempt processes the local executor runs now.",
		}, func() float64 {
			d.mu.Lock()
			defer d.mu.Unlock()
			return float64(len(d.running))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flyte_manager_executor_actions_waiting",
			Help: "Actions waiting for a free slot (executor.local.maxParallelism, the run's max_action_concurrency or a named queue's limits).",
		}, func() float64 {
			return float64(d.slots.Waiting())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flyte_manager_executor_queue_depth",
			Help: "Actions queued for the executor's workers.",
		}, func() float64 { return float64(d.q.len()) }),
	}
	return m
}

// RegisterMetrics registers the driver's collectors with reg (the server's
// registry, served on /metrics).
func (d *Driver) RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range append([]prometheus.Collector{d.metrics.started, d.metrics.ended, d.metrics.orphans, d.metrics.takeovers}, d.metrics.gauges...) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// countEnd counts a recorded end of an attempt.
func (m *metrics) countEnd(dec machine.Decision) {
	var result string
	switch dec := dec.(type) {
	case *machine.Retry:
		result = "retried"
	case *machine.Terminal:
		switch dec.Phase {
		case phase.Succeeded:
			result = "succeeded"
		case phase.Failed:
			result = "failed"
		case phase.TimedOut:
			result = "timed_out"
		case phase.Aborted:
			result = "aborted"
		}
	}
	if result != "" {
		m.ended.WithLabelValues(result).Inc()
	}
}
