// Package statetest builds a run state over a real database for tests: the
// store, a file blob store and a running change hub, torn down with the
// test. Every package's test harness starts from here instead of wiring
// the pieces again.
package statetest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/queues"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Options adjust a run state; the zero value is fine.
type Options struct {
	// Log receives the run state's logs; nil discards them.
	Log *slog.Logger
	// BlobDir is the blob store's directory; "" is a fresh temporary one.
	BlobDir string
	// Projects configures project admission; nil auto-creates projects.
	Projects *config.Projects
	// Queues are the named queues submits may route to (none if nil).
	Queues []config.Queue
	// ManualHub starts the change hub without running it: nothing reaches
	// a watcher until the test dispatches (runstate's own tests, which can
	// make the hub lag on purpose).
	ManualHub bool
}

// Env is what a run state was built from.
type Env struct {
	Store *store.Store
	Blobs *blob.Store
	Hub   *runstate.Hub
	Log   *slog.Logger
}

// New builds a run state over the migrated database g, with the executor
// newExec builds (runstate.NoExecutor for none).
func New[E runstate.Executor](t testing.TB, g *gorm.DB, o Options, newExec func(*runstate.Service) E) (*runstate.Service, E, *Env) {
	t.Helper()
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.BlobDir == "" {
		o.BlobDir = filepath.Join(t.TempDir(), "blobs")
	}
	projects := config.Projects{AutoCreate: true}
	if o.Projects != nil {
		projects = *o.Projects
	}
	blobs, err := blob.Open(context.Background(), "file://"+o.BlobDir)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(g)
	env := &Env{Store: st, Blobs: blobs, Log: o.Log}
	if o.ManualHub {
		env.Hub = runstate.NewHub(st.Actions, o.Log)
		if err := env.Hub.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	} else {
		env.Hub = Hub(t, st, o.Log)
	}
	state, exec := runstate.New(st, blobs, env.Hub, projects, o.Log, newExec, runstate.WithQueues(queues.New(o.Queues)))
	return state, exec, env
}

// Hub starts a change hub over st that runs until the test ends (a second
// manager on the same database has one of its own).
func Hub(t testing.TB, st *store.Store, log *slog.Logger) *runstate.Hub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hub := runstate.NewHub(st.Actions, log)
	if err := hub.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return hub
}
