package local

import (
	"context"
	"os"
	"path/filepath"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/apps"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/store"
)

// appsDir holds the apps' replicas in the work directory (no org is named
// with a leading dot, so it never meets a run's directory).
const appsDir = ".apps"

// AppsOptions are what the apps' runtime needs besides the driver's own.
type AppsOptions struct {
	// RawDataPrefix is where apps write data.
	RawDataPrefix string
	// Network is apps.network (apps.NetworkAuto, ...).
	Network string
}

// Apps returns the runtime that runs apps' replicas beside this driver's
// attempts: in <workDir>/.apps, as users leased from the attempts' range,
// confined like attempts, with the storage's variables attempts get, and
// only while this manager holds the executor lease (a standby runs none).
// Call it before Start.
func (d *Driver) Apps(rep appruntime.Reporter, o AppsOptions) *apps.Runtime {
	var env []contract.KV
	var storageKey func(appruntime.Key, string) ([]contract.Secret, error)
	if sa := d.hooks.Storage; sa != nil {
		env = append(env, sa.Env...)
		if sa.Scoped != nil {
			// A key of the replica's own, as an attempt gets: it reads the
			// app's project and domain and writes only the app's prefix.
			storageKey = func(k appruntime.Key, prefix string) ([]contract.Secret, error) {
				return sa.Scoped(&store.Action{ActionKey: appAction(k), RunOutputBase: prefix}, 0)
			}
		} else {
			for _, s := range sa.Secrets {
				if s.EnvVar != "" {
					env = append(env, contract.KV{Key: s.EnvVar, Value: string(s.Value)})
				}
			}
		}
	}
	var secrets func(context.Context, appruntime.Key, []string) (map[string][]byte, error)
	if h := d.hooks.Secrets; h != nil {
		secrets = func(ctx context.Context, k appruntime.Key, names []string) (map[string][]byte, error) {
			return h.Values(ctx, &store.Action{ActionKey: appAction(k)}, names)
		}
	}
	var credential func(appruntime.Key) string
	var tls bool
	var auth *contract.TaskAuth
	if cr := d.hooks.Credential; cr != nil && cr.MintApp != nil {
		credential, tls, auth = cr.MintApp, cr.TLS, &contract.TaskAuth{SkipVerify: cr.SkipVerify}
	}
	return apps.New(apps.Config{
		Credential:    credential,
		TLS:           tls,
		Auth:          auth,
		Secrets:       secrets,
		StorageKey:    storageKey,
		Dir:           filepath.Join(d.cfg.WorkDir, appsDir),
		Runner:        d.startedRunner,
		Users:         d.users,
		Endpoint:      d.endpoint,
		Env:           env,
		Host:          os.Environ(),
		RawDataPrefix: o.RawDataPrefix,
		Network:       o.Network,
		Holding:       func() bool { return d.lease.Fence() != 0 },
		Reporter:      rep,
		Log:           d.log.With("component", "apps"),
	})
}

// startedRunner is the runner of the attempts' processes once the driver
// started (nil before): replicas are started by it too, as plain
// processes, with the attempts' confinement.
func (d *Driver) startedRunner() *process.Runner {
	d.life.Lock()
	defer d.life.Unlock()
	return d.runner
}

// appAction stands for an app where the attempts' hooks take an action:
// its org, project and domain are what they look at.
func appAction(k appruntime.Key) store.ActionKey {
	return store.RunKey{Org: k.Org, Project: k.Project, Domain: k.Domain, RunName: "app:" + k.Name}.Action("app")
}
