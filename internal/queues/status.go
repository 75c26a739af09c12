package queues

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

// Status is one queue's limits with its counts, as the database has them
// (so every replica reports the same).
type Status struct {
	config.Queue
	// Depth counts its actions that have not ended: queued, waiting and
	// running (what maxDepth bounds).
	Depth int64
	// InFlight counts those whose attempt started (INITIALIZING or
	// RUNNING).
	InFlight int64
}

// Counter reads the counts of every queue.
type Counter interface {
	QueueCounts(ctx context.Context) (map[string]store.QueueCounts, error)
}

// Statuses lists every configured queue, by name, with its counts.
func (s *Set) Statuses(ctx context.Context, db Counter) ([]Status, error) {
	all := s.All()
	if len(all) == 0 {
		return nil, nil
	}
	counts, err := db.QueueCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, len(all))
	for i, q := range all {
		c := counts[q.Name]
		out[i] = Status{Queue: q, Depth: c.Depth, InFlight: c.InFlight}
	}
	return out, nil
}

var (
	depthDesc = prometheus.NewDesc("flyte_manager_queue_depth",
		"Actions on the named queue that have not ended (queued, waiting and running), from the database.", []string{"queue"}, nil)
	inFlightDesc = prometheus.NewDesc("flyte_manager_queue_in_flight",
		"Actions on the named queue whose attempt started (initializing or running), from the database.", []string{"queue"}, nil)
	limitDesc = prometheus.NewDesc("flyte_manager_queue_limit",
		"The named queue's configured limits (maxActionConcurrency, maxRunConcurrency, maxDepth); 0 means unlimited.", []string{"queue", "limit"}, nil)
)

// Collector exports every configured queue's depth, in-flight count and
// limits, counted in the database at scrape time.
type Collector struct {
	set *Set
	db  Counter
	log *slog.Logger
}

func NewCollector(set *Set, db Counter, log *slog.Logger) *Collector {
	return &Collector{set: set, db: db, log: log}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- depthDesc
	ch <- inFlightDesc
	ch <- limitDesc
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, q := range c.set.All() {
		for _, l := range []struct {
			name string
			v    int
		}{{"maxActionConcurrency", q.MaxActionConcurrency}, {"maxRunConcurrency", q.MaxRunConcurrency}, {"maxDepth", q.MaxDepth}} {
			ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(l.v), q.Name, l.name)
		}
	}
	st, err := c.set.Statuses(ctx, c.db)
	if err != nil {
		// Leave the counts out of this scrape rather than report zeros.
		c.log.Warn("counting queues for metrics", "err", err)
		return
	}
	for _, s := range st {
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(s.Depth), s.Name)
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(s.InFlight), s.Name)
	}
}
