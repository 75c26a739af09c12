package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type rpcMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  *prometheus.GaugeVec
}

func newRPCMetrics(reg *prometheus.Registry) *rpcMetrics {
	m := &rpcMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_rpc_requests_total",
			Help: "Finished RPCs by procedure, stream type and Connect code.",
		}, []string{"procedure", "type", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flyte_manager_rpc_duration_seconds",
			Help:    "RPC duration by procedure and stream type.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
		}, []string{"procedure", "type"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flyte_manager_rpc_streams_in_flight",
			Help: "Open streaming RPCs by procedure.",
		}, []string{"procedure"}),
	}
	reg.MustRegister(
		m.requests, m.duration, m.streams,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
