package local

import (
	"github.com/prometheus/client_golang/prometheus"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/logship"
	"fmgr.dev/internal/phase"
)

// metrics are the driver's Prometheus collectors; RegisterMetrics hands
// them to a registry.
type metrics struct {
	started   prometheus.Counter
	starts    *prometheus.CounterVec // by how: warm or plain
	ended     *prometheus.CounterVec
	orphans   prometheus.Counter
	takeovers prometheus.Counter
	logs      *logship.Metrics
	gauges    []prometheus.Collector
	core      *attempt.Metrics
}

func newMetrics(d *Driver) *metrics {
	m := &metrics{
		core: attempt.NewMetrics(),
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_executor_attempts_started_total",
			Help: "Attempt processes the local executor started.",
		}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_executor_process_starts_total",
			Help: "Attempt processes the local executor started, by how: warm (forked by the warm-start server, executor.local.warmStart) or plain (a fresh process).",
		}, []string{"how"}),
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
		logs: &logship.Metrics{
			Bytes: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "flyte_manager_executor_log_bytes_shipped_total",
				Help: "Bytes of attempt logs the local executor stored in blob storage (chunks while attempts run, the rest when they end).",
			}),
			Failures: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "flyte_manager_executor_log_ship_failures_total",
				Help: "Writes of attempt logs to blob storage that failed (the lines are tried again with the next chunk).",
			}),
		},
	}
	m.gauges = []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flyte_manager_executor_warm_server_restarts_total",
			Help: "Warm-start servers started after an earlier one ended (died, refused to serve, or was replaced).",
		}, func() float64 {
			d.life.Lock() // Start sets the runner under it
			r := d.runner
			d.life.Unlock()
			if r == nil {
				return 0
			}
			return float64(r.WarmStats().Restarts)
		}),
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
	// Every series at zero, so that rate() and increase() see the first one.
	for _, result := range []string{"succeeded", "failed", "timed_out", "aborted", "retried"} {
		m.ended.WithLabelValues(result)
	}
	for _, how := range []string{"warm", "plain"} {
		m.starts.WithLabelValues(how)
	}
	return m
}

// RegisterMetrics registers the driver's collectors with reg (the server's
// registry, served on /metrics).
func (d *Driver) RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range append(append([]prometheus.Collector{d.metrics.started, d.metrics.starts, d.metrics.ended, d.metrics.orphans, d.metrics.takeovers, d.metrics.logs.Bytes, d.metrics.logs.Failures}, d.metrics.gauges...), d.metrics.core.Collectors()...) {
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

// countStart counts a started attempt process, warm or plain.
func (m *metrics) countStart(warm bool) {
	m.started.Inc()
	how := "plain"
	if warm {
		how = "warm"
	}
	m.starts.WithLabelValues(how).Inc()
}
