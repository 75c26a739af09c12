package runstate

import "github.com/prometheus/client_golang/prometheus"

// The hub's metrics: where its changes come from (a notification from
// another replica, or the poll that stands in when notifications are off
// or lost), whether it hears notifications, and how many watch.
var (
	hubChangesDesc = prometheus.NewDesc("flyte_manager_hub_changes_total",
		"Changes the change hub dispatched, by what woke it: local (a write of this manager), notification (PostgreSQL LISTEN/NOTIFY: another replica's commit) or poll (the fallback).",
		[]string{"woken_by"}, nil)
	hubListeningDesc = prometheus.NewDesc("flyte_manager_hub_listening",
		"1 while the change hub hears the database's notifications of commits (PostgreSQL), 0 while it relies on its poll.", nil, nil)
	hubSubscribersDesc = prometheus.NewDesc("flyte_manager_hub_subscribers",
		"Open subscriptions to the change hub (watch streams and the executor's).", nil, nil)
)

// Describe implements prometheus.Collector.
func (h *Hub) Describe(ch chan<- *prometheus.Desc) {
	ch <- hubChangesDesc
	ch <- hubListeningDesc
	ch <- hubSubscribersDesc
}

// Collect implements prometheus.Collector.
func (h *Hub) Collect(ch chan<- prometheus.Metric) {
	st := h.Stats()
	for cause, n := range map[string]int64{"local": st.Local, "notification": st.Notified, "poll": st.Polled} {
		ch <- prometheus.MustNewConstMetric(hubChangesDesc, prometheus.CounterValue, float64(n), cause)
	}
	listening := 0.0
	if h.Listening() {
		listening = 1
	}
	ch <- prometheus.MustNewConstMetric(hubListeningDesc, prometheus.GaugeValue, listening)
	h.mu.Lock()
	subs := len(h.global)
	for _, run := range h.byRun {
		subs += len(run)
	}
	h.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(hubSubscribersDesc, prometheus.GaugeValue, float64(subs))
}
