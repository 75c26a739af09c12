package appruntime

import (
	"context"
	"sync"
)

// SyncGate tells the proxy when the service has handed a runtime every app
// once (after the manager started): until then an app the runtime does not
// know may exist all the same, so the proxy waits instead of answering
// 404. A runtime embeds one; the service calls Synced (through Syncer).
type SyncGate struct {
	made, closed sync.Once
	ch           chan struct{}
}

func (g *SyncGate) done() chan struct{} {
	g.made.Do(func() { g.ch = make(chan struct{}) })
	return g.ch
}

// Synced records that every app was handed over.
func (g *SyncGate) Synced() { g.closed.Do(func() { close(g.done()) }) }

// WaitSynced waits for Synced, or for ctx to end (its error then).
func (g *SyncGate) WaitSynced(ctx context.Context) error {
	select {
	case <-g.done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Syncer is a runtime with a SyncGate.
type Syncer interface {
	Synced()
	WaitSynced(ctx context.Context) error
}
