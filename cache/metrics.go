package cache

import "github.com/prometheus/client_golang/prometheus"

// metrics are the cache's Prometheus collectors.
type metrics struct {
	lookups    *prometheus.CounterVec
	puts       *prometheus.CounterVec
	heartbeats prometheus.Counter
	released   prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_cache_lookups_total",
			Help: "Cache lookups of the executors before an attempt: hit, miss, skipped (overwrite_cache) or wait (another action holds the reservation).",
		}, []string{"result"}),
		puts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_cache_puts_total",
			Help: "Outputs the executors cached after a success: populated or failed.",
		}, []string{"result"}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_cache_reservation_heartbeats_total",
			Help: "Reservations extended for actions whose attempt runs.",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flyte_manager_cache_reservations_released_total",
			Help: "Reservations the upkeep released because their action ended or is gone.",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lookups, m.puts, m.heartbeats, m.released}
}
