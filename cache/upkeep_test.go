package cache

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The upkeep worker's heartbeat keeps the reservations of actions whose
// attempt runs (also after a restart: it reads the actions' state, not
// memory), releases those of actions that ended or are gone, and leaves
// pending actions' and API clients' reservations to expire on their own.
func TestUpkeepHeartbeat(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		st := store.New(g)
		cfg := config.Default().Cache
		cfg.MaxReservationHeartbeat = time.Second
		c := New(cfg, g, nil, st.Actions, slog.New(slog.NewTextHandler(io.Discard, nil)))
		sc := Scope{Project: "p", Domain: "d"}
		action := func(run string, p phase.Phase) *store.Action {
			a, err := st.Actions.CreateRun(ctx, store.NewAction{Key: store.RunKey{Project: "p", Domain: "d", RunName: run}.Action(store.RootName)})
			if err != nil {
				t.Fatal(err)
			}
			if p != phase.Queued {
				if a, err = st.Actions.Update(ctx, a.ActionKey, store.AnyVersion, store.Update{Phase: p}); err != nil {
					t.Fatal(err)
				}
			}
			return a
		}
		owners := map[string]string{
			"running": ownerOf(action("rrunning", phase.Running)),
			"ended":   ownerOf(action("rended", phase.Succeeded)),
			"queued":  ownerOf(action("rqueued", phase.Queued)),
			"gone":    ownerOf(&store.Action{ActionKey: store.RunKey{Project: "p", Domain: "d", RunName: "rgone"}.Action("a0")}),
			"client":  "some-client",
		}
		if k, ok := actionOf(owners["running"]); !ok || k.RunName != "rrunning" || k.Org != "" || k.Name != "a0" {
			t.Fatalf("owner %q names %v", owners["running"], k)
		}
		for key, owner := range owners {
			if r, err := c.repo.Reserve(ctx, sc, key, owner, 0); err != nil || r.OwnerID != owner {
				t.Fatalf("reserve %s: %v %v", key, r, err)
			}
		}
		// All due sooner than any heartbeat would set them.
		soon := db.Now().Add(time.Second)
		if err := g.Model(&Reservation{}).Where("1 = 1").Update("expires_at", soon).Error; err != nil {
			t.Fatal(err)
		}
		before := map[string]time.Time{}
		for key := range owners {
			before[key] = soon
		}
		if err := c.heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		rs, err := c.repo.Reservations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after := map[string]Reservation{}
		for _, r := range rs {
			after[r.CacheKey] = r
		}
		for _, gone := range []string{"ended", "gone"} {
			if _, ok := after[gone]; ok {
				t.Errorf("the reservation of a %s action was kept", gone)
			}
		}
		if r, ok := after["running"]; !ok || !r.ExpiresAt.After(before["running"]) {
			t.Errorf("the running action's reservation was not extended: %+v (was until %v)", r, before["running"])
		}
		for _, same := range []string{"queued", "client"} {
			if r, ok := after[same]; !ok || !r.ExpiresAt.Equal(before[same]) {
				t.Errorf("the %s reservation changed: %+v (was until %v)", same, r, before[same])
			}
		}
	})
}

// The heartbeat's cost does not grow with the number of reservations: one
// read of them, one of their holders' phases, one write to extend and one
// to release, for thirty holders in thirty runs as for one.
func TestUpkeepHeartbeatStatementsFlat(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		st := store.New(g)
		c := New(config.Default().Cache, g, nil, st.Actions, slog.New(slog.NewTextHandler(io.Discard, nil)))
		sc := Scope{Project: "p", Domain: "d"}
		for i := range 30 {
			key := store.RunKey{Project: "p", Domain: "d", RunName: fmt.Sprintf("r%d", i)}.Action(store.RootName)
			a, err := st.Actions.CreateRun(ctx, store.NewAction{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			p := phase.Running
			if i%3 == 0 {
				p = phase.Failed
			}
			if a, err = st.Actions.Update(ctx, a.ActionKey, store.AnyVersion, store.Update{Phase: p}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.repo.Reserve(ctx, sc, fmt.Sprintf("k%d", i), ownerOf(a), 0); err != nil {
				t.Fatal(err)
			}
		}
		before := db.StatementTotal(g)
		if err := c.heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if n := db.StatementTotal(g) - before; n != 4 {
			t.Errorf("the heartbeat of 30 reservations took %d statements, want 4", n)
		}
		rs, err := c.repo.Reservations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 20 {
			t.Errorf("%d reservations left, want the 20 of running actions", len(rs))
		}
	})
}
