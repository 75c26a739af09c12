package local

import (
	"context"

	"fmgr.dev/internal/server"
)

// Setup registers the driver with srv: its metrics, its readiness check and
// the driver itself as a background worker (it starts once srv listens,
// since task processes need the address the manager advertises).
func Setup(srv *server.Server, d *Driver) error {
	if err := d.RegisterMetrics(srv.Registry()); err != nil {
		return err
	}
	// A standby executor (another manager holds the executor lease) is
	// ready: this manager serves the API in full, and /readyz says which
	// one it is (see Driver.Ready).
	srv.AddReadinessCheck("executor", func(context.Context) error {
		if err := d.Ready(); err != nil {
			return err
		}
		return server.Detail(d.LeaseStatus())
	})
	srv.AddWorker("executor", d.Run)
	return nil
}
