package compose

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// homeDiskCollector reports the size and free space of the filesystem
// holding the data dir: the SQLite database, the blob store of the
// embedded default and attempts' working directories all grow there, and
// a full disk stops every one of them at once.
func homeDiskCollector(home string) prometheus.Collector {
	statfs := func() (size, free float64) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(home, &st); err != nil {
			return 0, 0
		}
		return float64(st.Blocks) * float64(st.Bsize), float64(st.Bavail) * float64(st.Bsize)
	}
	return collectorList{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flyte_manager_home_filesystem_size_bytes",
			Help: "Size of the filesystem holding the manager's data dir.",
		}, func() float64 { s, _ := statfs(); return s }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flyte_manager_home_filesystem_free_bytes",
			Help: "Space left to the manager on the filesystem holding its data dir.",
		}, func() float64 { _, f := statfs(); return f }),
	}
}

// collectorList is several collectors registered as one.
type collectorList []prometheus.Collector

func (l collectorList) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range l {
		c.Describe(ch)
	}
}

func (l collectorList) Collect(ch chan<- prometheus.Metric) {
	for _, c := range l {
		c.Collect(ch)
	}
}
