package attempt

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Metrics are what the attempt core measures for either executor, so the
// dashboard and the alerts read one name whichever executor runs: how long
// actions wait before the executor claims them, and why attempts fail.
// A driver makes them once (its core may be rebuilt) and registers
// Collectors with the server's registry.
type Metrics struct {
	startDelay prometheus.Histogram
	failures   *prometheus.CounterVec
}

// NewMetrics makes the core's metrics, every failure series at zero so
// that rate() and increase() see the first failure.
func NewMetrics() *Metrics {
	m := &Metrics{
		startDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flyte_manager_executor_start_delay_seconds",
			Help:    "Time from an action's creation to the executor's claim of its first attempt (queued, waiting for capacity or its queue's limit).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_executor_attempt_failures_total",
			Help: "Failed attempts by error kind (user, system, unknown) and outcome (retried, or final when the action failed or timed out).",
		}, []string{"kind", "outcome"}),
	}
	for _, kind := range []machine.ErrorKind{machine.KindUser, machine.KindSystem, machine.KindUnknown} {
		for _, outcome := range []string{"retried", "final"} {
			m.failures.WithLabelValues(strings.ToLower(kind.String()), outcome)
		}
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.startDelay, m.failures}
}

// observe counts one recorded decision (at is when it was written).
func (m *Metrics) observe(a *store.Action, ev machine.Event, dec machine.Decision, at time.Time) {
	if m == nil {
		return
	}
	if start, ok := ev.(machine.Start); ok && start.Attempt <= 1 && !a.CreatedAt.IsZero() {
		m.startDelay.Observe(max(at.Sub(a.CreatedAt), 0).Seconds())
	}
	switch dec := dec.(type) {
	case *machine.Retry:
		m.failures.WithLabelValues(strings.ToLower(dec.Cause.Kind.String()), "retried").Inc()
	case *machine.Terminal:
		if dec.Error != nil && (dec.Phase == phase.Failed || dec.Phase == phase.TimedOut) {
			m.failures.WithLabelValues(strings.ToLower(dec.Error.Kind.String()), "final").Inc()
		}
	}
}
