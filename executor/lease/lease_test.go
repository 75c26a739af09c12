package lease_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/executor/lease"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// events records what a keeper reported.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) { e.mu.Lock(); e.got = append(e.got, s); e.mu.Unlock() }
func (e *events) Taken(_ int64, prev store.Lease) {
	if prev.Holder == "" {
		e.add("taken free")
	} else {
		e.add("taken over")
	}
}
func (e *events) Lost(int64, string)   { e.add("lost") }
func (e *events) Paused(int64, string) { e.add("paused") }
func (e *events) Resumed(int64)        { e.add("resumed") }
func (e *events) list() string         { e.mu.Lock(); defer e.mu.Unlock(); return strings.Join(e.got, ",") }

// One holder at a time: a free lease is taken at once, a held one only after
// it went a whole TTL without renewal, with a new token; the old holder
// learns it lost the lease at its next renewal, and a release frees the
// lease for the next manager at once.
func TestTakeoverAndRelease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		st := store.New(g)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		const ttl = 2 * time.Second
		ea, eb := &events{}, &events{}
		a := lease.New(st.Leases, t.TempDir(), ttl, log, ea)
		b := lease.New(st.Leases, t.TempDir(), ttl, log, eb)

		a.Step(ctx)
		if a.Fence() == 0 || ea.list() != "taken free" {
			t.Fatalf("a: fence %d, events %q; want the free lease taken", a.Fence(), ea.list())
		}
		b.Step(ctx)
		if b.Fence() != 0 || !strings.Contains(b.Describe(), a.Holder()) {
			t.Fatalf("b took a held lease (fence %d) or does not name its holder: %s", b.Fence(), b.Describe())
		}
		// a stops renewing; b takes over once the row stood still for a TTL.
		deadline := time.Now().Add(20 * ttl)
		for b.Fence() == 0 && time.Now().Before(deadline) {
			time.Sleep(ttl / 5)
			b.Step(ctx)
		}
		if b.Fence() <= a.Fence() || eb.list() != "taken over" {
			t.Fatalf("b: fence %d (a had %d), events %q; want a takeover with a newer token", b.Fence(), a.Fence(), eb.list())
		}
		// a, past half its TTL without a renewal, pauses first; its next
		// renewal is refused for the token.
		a.Step(ctx)
		if ea.list() != "taken free,paused" || !a.Paused() {
			t.Fatalf("a, long unrenewed: events %q", ea.list())
		}
		a.Step(ctx)
		if a.Fence() != 0 || ea.list() != "taken free,paused,lost" {
			t.Fatalf("a after the takeover: fence %d, events %q", a.Fence(), ea.list())
		}
		b.Release(ctx)
		a.Step(ctx)
		if a.Fence() == 0 || ea.list() != "taken free,paused,lost,taken free" {
			t.Fatalf("a after b's release: fence %d, events %q", a.Fence(), ea.list())
		}
	})
}
