package retention

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Disk measures what attempt directories (their working directories and
// logs) take in the local executor's work dir, against retention.diskCap.
// Measuring walks the tree, so it runs in the background (Run) and readers
// get the last measure.
type Disk struct {
	dir      string
	capBytes int64
	used     atomic.Int64
	measured atomic.Bool
	gauge    prometheus.Gauge
}

// NewDisk watches dir with the cap capBytes (0: none).
func NewDisk(dir string, capBytes int64) *Disk {
	return &Disk{dir: dir, capBytes: capBytes, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flyte_manager_attempt_dirs_bytes",
		Help: "Bytes the attempt directories (working directories and logs) take in executor.local.workDir, as last measured.",
	})}
}

// Collector is the gauge of the last measure.
func (d *Disk) Collector() prometheus.Collector { return d.gauge }

// Measure walks the work dir's attempt directories (not the executor's own
// dot-entries, such as apps) and records their size.
func (d *Disk) Measure() int64 {
	var n int64
	entries, _ := os.ReadDir(d.dir)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			n += DirSize(filepath.Join(d.dir, e.Name()))
		}
	}
	d.used.Store(n)
	d.measured.Store(true)
	d.gauge.Set(float64(n))
	return n
}

// Run measures now and then every interval until ctx ends.
func (d *Disk) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		d.Measure()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Near reports, once the last measure passed 90% of the cap, how much of
// it is used; "" when below, when there is no cap or nothing was measured.
func (d *Disk) Near() string {
	if d.capBytes <= 0 || !d.measured.Load() {
		return ""
	}
	used := d.used.Load()
	if used*10 < d.capBytes*9 {
		return ""
	}
	return fmt.Sprintf("attempt directories use %d of retention.diskCap %d bytes (%d%%): collect runs sooner (retention.default, rules) or raise the cap",
		used, d.capBytes, used*100/d.capBytes)
}
