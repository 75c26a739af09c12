package cache_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gorm.io/gorm"

	"fmgr.dev/cache"
	pb "fmgr.dev/gen/go/flyteidl2/cacheservice"
	"fmgr.dev/gen/go/flyteidl2/cacheservice/cacheserviceconnect"
	v2 "fmgr.dev/gen/go/flyteidl2/cacheservice/v2"
	"fmgr.dev/gen/go/flyteidl2/cacheservice/v2/v2connect"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type harness struct {
	c     *cache.Cache
	blobs *blob.Store
	v1    cacheserviceconnect.CacheServiceClient
	v2    v2connect.CacheServiceClient
}

// each serves both cache services through the manager's real server on
// SQLite and on PostgreSQL.
func each(t *testing.T, cfg config.Cache, fn func(t *testing.T, h *harness)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		blobs, err := blob.Open(context.Background(), "mem://")
		if err != nil {
			t.Fatal(err)
		}
		c := cache.New(cfg, g, blobs, store.New(g).Actions, log)
		srvCfg := config.Default().Server
		srvCfg.Port = 0
		// Entries are scoped by org: the tests name one of their own.
		srvCfg.Orgs.Separate = true
		s := server.New(srvCfg, log)
		if err := cache.Setup(s, c); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(hs.Close)
		fn(t, &harness{c: c, blobs: blobs, v1: cacheserviceconnect.NewCacheServiceClient(hs.Client(), hs.URL),
			v2: v2connect.NewCacheServiceClient(hs.Client(), hs.URL)})
	})
}

func id(project string) *v2.Identifier {
	return &v2.Identifier{Org: "o", Project: project, Domain: "development"}
}

// out is an output location in project's own storage (org o, development).
func (h *harness) out(project, name string) string {
	return h.blobs.URI("runs/o/" + project + "/development/" + name + "/a0/1")
}

func (h *harness) put(ctx context.Context, project, key, uri string, ow *pb.OverwriteOutput) error {
	_, err := h.v2.Put(ctx, connect.NewRequest(&v2.PutCacheRequest{Identifier: id(project), BaseRequest: &pb.PutCacheRequest{
		Key: key, Overwrite: ow, Output: &pb.CachedOutput{Output: &pb.CachedOutput_OutputUri{OutputUri: uri},
			Metadata: &pb.Metadata{SourceIdentifier: &core.Identifier{Name: "env.task"}}}}}))
	return err
}

func (h *harness) get(ctx context.Context, project, key string) (*pb.GetCacheResponse, error) {
	res, err := h.v2.Get(ctx, connect.NewRequest(&v2.GetCacheRequest{Identifier: id(project), BaseRequest: &pb.GetCacheRequest{Key: key}}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

func (h *harness) reserve(ctx context.Context, key, owner string, hb time.Duration) (*pb.Reservation, error) {
	res, err := h.v2.GetOrExtendReservation(ctx, connect.NewRequest(&v2.GetOrExtendReservationRequest{Identifier: id("p"),
		BaseRequest: &pb.GetOrExtendReservationRequest{Key: key, OwnerId: owner, HeartbeatInterval: durationpb.New(hb)}}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetReservation(), nil
}

func wantCode(t *testing.T, what string, err error, code connect.Code, mention string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code || !strings.Contains(ce.Message(), mention) {
		t.Fatalf("%s: %v, want %s mentioning %q", what, err, code, mention)
	}
}

// Get, Put (with overwrite and max_age), Delete in the scope each request
// names; bad requests get InvalidArgument and change nothing.
func TestOutputs(t *testing.T) {
	each(t, config.Default().Cache, func(t *testing.T, h *harness) {
		ctx := context.Background()
		_, err := h.get(ctx, "p", "k1")
		wantCode(t, "get before put", err, connect.CodeNotFound, "k1")

		if err := h.put(ctx, "p", "k1", h.out("p", "r1"), nil); err != nil {
			t.Fatal(err)
		}
		got, err := h.get(ctx, "p", "k1")
		if err != nil || got.GetOutput().GetOutputUri() != h.out("p", "r1") || got.GetOutput().GetMetadata().GetSourceIdentifier().GetName() != "env.task" ||
			got.GetOutput().GetMetadata().GetCreatedAt() == nil {
			t.Fatalf("get: %v %v", got, err)
		}
		created := got.GetOutput().GetMetadata().GetCreatedAt().AsTime()

		// Scoped: another project (or v1's empty scope) does not see it.
		_, err = h.get(ctx, "q", "k1")
		wantCode(t, "other project", err, connect.CodeNotFound, "k1")
		_, err = h.v1.Get(ctx, connect.NewRequest(&pb.GetCacheRequest{Key: "k1"}))
		wantCode(t, "v1 scope", err, connect.CodeNotFound, "k1")

		wantCode(t, "put again", h.put(ctx, "p", "k1", h.out("p", "r2"), nil), connect.CodeAlreadyExists, "overwrite")
		if err := h.put(ctx, "p", "k1", h.out("p", "r2"), &pb.OverwriteOutput{Overwrite: true}); err != nil {
			t.Fatal(err)
		}
		// max_age: an entry older than it is replaced without overwrite.
		wantCode(t, "young entry", h.put(ctx, "p", "k1", h.out("p", "r3"), &pb.OverwriteOutput{MaxAge: durationpb.New(time.Hour)}),
			connect.CodeAlreadyExists, "k1")
		if err := h.put(ctx, "p", "k1", h.out("p", "r3"), &pb.OverwriteOutput{MaxAge: durationpb.New(time.Nanosecond)}); err != nil {
			t.Fatalf("an entry older than max_age was not replaced: %v", err)
		}
		got, _ = h.get(ctx, "p", "k1")
		if got.GetOutput().GetOutputUri() != h.out("p", "r3") || !got.GetOutput().GetMetadata().GetCreatedAt().AsTime().Equal(created) {
			t.Fatalf("after overwrite: %v (created %v, first %v)", got, got.GetOutput().GetMetadata().GetCreatedAt().AsTime(), created)
		}

		for what, req := range map[string]*pb.PutCacheRequest{
			"literals": {Key: "k2", Output: &pb.CachedOutput{Output: &pb.CachedOutput_OutputLiterals{OutputLiterals: &core.LiteralMap{}}}},
			"no uri":   {Key: "k2", Output: &pb.CachedOutput{}},
			"no key":   {Output: &pb.CachedOutput{Output: &pb.CachedOutput_OutputUri{OutputUri: h.out("p", "r4")}}},
			"bad time": {Key: "k2", Output: &pb.CachedOutput{Output: &pb.CachedOutput_OutputUri{OutputUri: h.out("p", "r4")},
				Metadata: &pb.Metadata{CreatedAt: &timestamppb.Timestamp{Seconds: -1 << 62}}}},
		} {
			_, err := h.v2.Put(ctx, connect.NewRequest(&v2.PutCacheRequest{Identifier: id("p"), BaseRequest: req}))
			wantCode(t, what, err, connect.CodeInvalidArgument, "")
		}
		_, err = h.v2.Get(ctx, connect.NewRequest(&v2.GetCacheRequest{BaseRequest: &pb.GetCacheRequest{Key: "k1"}}))
		wantCode(t, "no identifier", err, connect.CodeInvalidArgument, "identifier.project")
		_, err = h.get(ctx, "p", "k2")
		wantCode(t, "rejected puts stored nothing", err, connect.CodeNotFound, "k2")

		if _, err := h.v2.Delete(ctx, connect.NewRequest(&v2.DeleteCacheRequest{Identifier: id("p"), BaseRequest: &pb.DeleteCacheRequest{Key: "k1"}})); err != nil {
			t.Fatal(err)
		}
		_, err = h.v2.Delete(ctx, connect.NewRequest(&v2.DeleteCacheRequest{Identifier: id("p"), BaseRequest: &pb.DeleteCacheRequest{Key: "k1"}}))
		wantCode(t, "delete twice", err, connect.CodeNotFound, "k1")

		// v1: the same procedures in the empty scope.
		if _, err := h.v1.Put(ctx, connect.NewRequest(&pb.PutCacheRequest{Key: "k1", Output: &pb.CachedOutput{Output: &pb.CachedOutput_OutputUri{OutputUri: h.out("p", "r5")}}})); err != nil {
			t.Fatal(err)
		}
		if res, err := h.v1.Get(ctx, connect.NewRequest(&pb.GetCacheRequest{Key: "k1"})); err != nil || res.Msg.GetOutput().GetOutputUri() != h.out("p", "r5") {
			t.Fatalf("v1 get: %v %v", res, err)
		}
	})
}

// held checks that r is a real reservation of key held by owner, granted
// or extended between from and to with a heartbeat of hb and the grace
// multiplier grace: expiring hb*grace after it was granted, not before and
// not long after. A nil or empty reservation fails every check.
func held(t *testing.T, what string, r *pb.Reservation, key, owner string, hb time.Duration, grace int, from, to time.Time) {
	t.Helper()
	if r == nil {
		t.Fatalf("%s: no reservation in the response, want %s's of %q", what, owner, key)
	}
	if r.GetKey() != key || r.GetOwnerId() != owner {
		t.Fatalf("%s: reservation of %q held by %q, want %q held by %q", what, r.GetKey(), r.GetOwnerId(), key, owner)
	}
	if got := r.GetHeartbeatInterval().AsDuration(); r.GetHeartbeatInterval() == nil || got != hb {
		t.Fatalf("%s: heartbeat interval %v, want %v", what, r.GetHeartbeatInterval(), hb)
	}
	if r.GetExpiresAt() == nil {
		t.Fatalf("%s: no expiry", what)
	}
	// The server stores microseconds: allow for the truncation.
	exp, life := r.GetExpiresAt().AsTime(), hb*time.Duration(grace)
	if exp.Before(from.Add(life).Add(-time.Millisecond)) || exp.After(to.Add(life).Add(time.Millisecond)) {
		t.Fatalf("%s: expires at %v, want %v after it was granted (between %v and %v)", what, exp, life, from, to)
	}
}

func (h *harness) release(ctx context.Context, t *testing.T, key, owner string) {
	t.Helper()
	if _, err := h.v2.ReleaseReservation(ctx, connect.NewRequest(&v2.ReleaseReservationRequest{Identifier: id("p"),
		BaseRequest: &pb.ReleaseReservationRequest{Key: key, OwnerId: owner}})); err != nil {
		t.Fatalf("%s releases %q: %v", owner, key, err)
	}
}

// Reservations: granted to the first owner with its key, heartbeat (capped)
// and expiry; refused to every other owner while held, who gets the
// holder's reservation unchanged; extended by its owner; independent per
// key; ended by the owner's release only, after which another owner takes
// it at once; taken over by another owner once expired.
func TestReservations(t *testing.T) {
	cfg := config.Default().Cache
	cfg.MaxReservationHeartbeat, cfg.HeartbeatGraceMultiplier = time.Second, 2
	each(t, cfg, func(t *testing.T, h *harness) {
		ctx := context.Background()
		from := time.Now()
		r, err := h.reserve(ctx, "k", "alice", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		held(t, "alice's first request (heartbeat capped at 1s)", r, "k", "alice", time.Second, 2, from, time.Now())

		// Held: bob is refused, again and again, and sees alice's
		// reservation as it stands.
		for i := range 3 {
			b, err := h.reserve(ctx, "k", "bob", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			held(t, "bob's request while alice holds k", b, "k", "alice", time.Second, 2, from, time.Now())
			if !b.GetExpiresAt().AsTime().Equal(r.GetExpiresAt().AsTime()) {
				t.Fatalf("bob's request %d moved alice's expiry from %v to %v", i, r.GetExpiresAt().AsTime(), b.GetExpiresAt().AsTime())
			}
		}
		// Another key is free while k is held.
		from2 := time.Now()
		b, err := h.reserve(ctx, "k2", "bob", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held(t, "bob's request of another key", b, "k2", "bob", time.Second, 2, from2, time.Now())

		// Alice's heartbeat extends her reservation: a later expiry.
		from = time.Now()
		ext, err := h.reserve(ctx, "k", "alice", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held(t, "alice's heartbeat", ext, "k", "alice", time.Second, 2, from, time.Now())
		if !ext.GetExpiresAt().AsTime().After(r.GetExpiresAt().AsTime()) {
			t.Fatalf("alice's heartbeat left her expiry at %v (was %v)", ext.GetExpiresAt().AsTime(), r.GetExpiresAt().AsTime())
		}

		// Bob's release leaves alice's reservation alone.
		h.release(ctx, t, "k", "bob")
		if b, err = h.reserve(ctx, "k", "carol", time.Second); err != nil {
			t.Fatal(err)
		}
		held(t, "carol's request after bob's release", b, "k", "alice", time.Second, 2, from, time.Now())
		if !b.GetExpiresAt().AsTime().Equal(ext.GetExpiresAt().AsTime()) {
			t.Fatalf("after bob's release alice's expiry is %v, want %v", b.GetExpiresAt().AsTime(), ext.GetExpiresAt().AsTime())
		}

		// Alice stops heartbeating: once it expired bob takes over, not
		// before.
		if testkit.Poll(time.Minute, 100*time.Millisecond, func() string {
			from = time.Now()
			if r, err = h.reserve(ctx, "k", "bob", time.Second); err != nil {
				t.Fatal(err)
			}
			if r.GetOwnerId() != "bob" {
				held(t, "bob's request before alice's reservation expired", r, "k", "alice", time.Second, 2, time.Time{}, time.Now())
				return "not yet"
			}
			return ""
		}) != "" {
			t.Fatalf("alice's reservation never expired: %v", r)
		}
		held(t, "bob's takeover", r, "k", "bob", time.Second, 2, from, time.Now())
		if from.Before(ext.GetExpiresAt().AsTime().Add(-time.Millisecond)) {
			t.Fatalf("bob took over at %v, alice's reservation ran until %v", from, ext.GetExpiresAt().AsTime())
		}

		// Bob releases: carol takes it at once, though bob's would not
		// have expired yet.
		h.release(ctx, t, "k", "bob")
		h.release(ctx, t, "k", "bob") // releasing twice is fine
		from = time.Now()
		if r, err = h.reserve(ctx, "k", "carol", time.Second); err != nil {
			t.Fatal(err)
		}
		held(t, "carol's request after bob's release", r, "k", "carol", time.Second, 2, from, time.Now())

		_, err = h.reserve(ctx, "k", "", time.Second)
		wantCode(t, "no owner", err, connect.CodeInvalidArgument, "owner_id")
		_, err = h.reserve(ctx, "", "dave", time.Second)
		wantCode(t, "no key", err, connect.CodeInvalidArgument, "key")
	})
}

// Many owners asking at once: exactly one of them is granted the
// reservation, and every other is refused with that holder's reservation;
// while it is held a loser asking again is still refused, and once the
// holder releases it a loser takes it.
func TestReservationRace(t *testing.T) {
	each(t, config.Default().Cache, func(t *testing.T, h *harness) {
		ctx := context.Background()
		hb, grace := time.Second, config.Default().Cache.HeartbeatGraceMultiplier
		var wg sync.WaitGroup
		got := make([]*pb.Reservation, 8)
		errs := make([]error, 8)
		owner := func(i int) string { return string(rune('a' + i)) }
		from := time.Now()
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = h.reserve(ctx, "race", owner(i), hb)
			}()
		}
		wg.Wait()
		to := time.Now()
		for i := range errs {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
		}
		if got[0] == nil {
			t.Fatal("owner a got no reservation in the response")
		}
		winner := got[0].GetOwnerId()
		granted := -1
		for i := range got {
			held(t, "owner "+owner(i), got[i], "race", winner, hb, grace, from, to)
			if !got[i].GetExpiresAt().AsTime().Equal(got[0].GetExpiresAt().AsTime()) {
				t.Fatalf("owners saw different expiries: %v and %v", got[0].GetExpiresAt().AsTime(), got[i].GetExpiresAt().AsTime())
			}
			if owner(i) == winner {
				granted = i
			}
		}
		if granted < 0 {
			t.Fatalf("the reservation is held by %q, who did not ask for it", winner)
		}
		loser := owner((granted + 1) % len(got))
		r, err := h.reserve(ctx, "race", loser, hb)
		if err != nil {
			t.Fatal(err)
		}
		held(t, loser+" asking again while held", r, "race", winner, hb, grace, from, to)

		h.release(ctx, t, "race", winner)
		from = time.Now()
		if r, err = h.reserve(ctx, "race", loser, hb); err != nil {
			t.Fatal(err)
		}
		held(t, loser+" after "+winner+"'s release", r, "race", loser, hb, grace, from, time.Now())
	})
}

// The bounds beyond the reference: entries past the time-to-live miss and
// are swept; past maxEntries the oldest are evicted; purge by project,
// domain and task, with a dry run that deletes nothing.
func TestBoundsAndPurge(t *testing.T) {
	cfg := config.Default().Cache
	cfg.MaxEntries = 3
	each(t, cfg, func(t *testing.T, h *harness) {
		ctx := context.Background()
		for _, k := range []string{"a", "b", "c", "d"} {
			if err := h.put(ctx, "p", k, h.out("p", "u-"+k), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, n, err := h.c.Repo().Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("the sweep deleted %d entries (%v), want the one past maxEntries", n, err)
		}
		if _, err := h.get(ctx, "p", "a"); err == nil {
			t.Fatal("the oldest entry survived a sweep past maxEntries")
		}
		for _, k := range []string{"b", "c", "d"} {
			if _, err := h.get(ctx, "p", k); err != nil {
				t.Fatalf("entry %s: %v", k, err)
			}
		}
		repo := h.c.Repo()
		sc := cache.Scope{Org: "o", Project: "p", Domain: "development"}
		dry, err := repo.Purge(ctx, sc, "env.task", true)
		if err != nil || len(dry) != 3 {
			t.Fatalf("dry run: %d %v", len(dry), err)
		}
		if none, _ := repo.Purge(ctx, sc, "other.task", false); len(none) != 0 {
			t.Fatalf("purging another task deleted %d", len(none))
		}
		if _, err := h.get(ctx, "p", "b"); err != nil {
			t.Fatalf("the dry run deleted: %v", err)
		}
		if gone, err := repo.Purge(ctx, sc, "", false); err != nil || len(gone) != 3 {
			t.Fatalf("purge: %d %v", len(gone), err)
		}
		if _, err := h.get(ctx, "p", "b"); err == nil {
			t.Fatal("purged entry still served")
		}
	})
	ttl := config.Default().Cache
	ttl.TTL = time.Second
	each(t, ttl, func(t *testing.T, h *harness) {
		ctx := context.Background()
		if err := h.put(ctx, "p", "k", h.out("p", "u"), nil); err != nil {
			t.Fatal(err)
		}
		if testkit.Poll(time.Minute, 100*time.Millisecond, func() string {
			if _, err := h.get(ctx, "p", "k"); err != nil {
				wantCode(t, "expired", err, connect.CodeNotFound, "k")
				return ""
			}
			return "still served"
		}) != "" {
			t.Fatal("an entry past its time-to-live is still served")
		}
		if _, n, err := h.c.Repo().Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep removed %d entries: %v", n, err)
		}
		if err := h.put(ctx, "p", "k", h.out("p", "u2"), nil); err != nil {
			t.Fatalf("a put over a swept entry: %v", err)
		}
	})
}
