package kube

import (
	"context"

	"fmgr.dev/internal/server"
)

// Setup registers the driver with srv: its metrics, its readiness check and
// the driver itself as a background worker (it starts once srv listens:
// Pods need the address the manager advertises).
func Setup(srv *server.Server, d *Driver) error {
	if err := d.metrics.Register(srv.Registry()); err != nil {
		return err
	}
	srv.AddReadinessCheck("executor", func(context.Context) error {
		if err := d.Ready(); err != nil {
			return err
		}
		return server.Detail(d.LeaseStatus())
	})
	srv.AddWorker("executor", d.Run)
	return nil
}
