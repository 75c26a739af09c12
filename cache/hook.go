package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"gorm.io/gorm"

	"fmgr.dev/executor/attempt"
	pb "fmgr.dev/gen/go/flyteidl2/cacheservice"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// Cache is the output cache: its repository, the executors' hook and the
// upkeep worker (heartbeats of running holders, the sweep).
type Cache struct {
	repo    *Repo
	blobs   *blob.Store
	actions *store.Actions
	log     *slog.Logger
	sweep   time.Duration
	metrics *metrics
	// crossProject lets GLOBAL lookups hit other projects' entries
	// (cache.crossProjectLookup).
	crossProject bool

	// rootKeys remembers the keys computed from root actions' inputs: a
	// serialized run waiting for its holder is planned again every few
	// seconds, and its inputs (so its key) never change.
	mu       sync.Mutex
	rootKeys map[store.ActionKey]string
}

// New builds the cache over the shared database g; blobs holds the actions'
// inputs (for the keys of root actions), actions their state.
func New(cfg config.Cache, g *gorm.DB, blobs *blob.Store, actions *store.Actions, log *slog.Logger) *Cache {
	repo := NewRepo(g, Limits{TTL: cfg.TTL, MaxEntries: cfg.MaxEntries, MaxHeartbeat: cfg.MaxReservationHeartbeat,
		Grace: cfg.HeartbeatGraceMultiplier})
	sweep := cfg.SweepInterval
	if sweep <= 0 {
		sweep = time.Minute
	}
	return &Cache{repo: repo, blobs: blobs, actions: actions, log: log, sweep: sweep, metrics: newMetrics(),
		crossProject: cfg.CrossProjectLookup, rootKeys: map[store.ActionKey]string{}}
}

// Repo is the cache's repository.
func (c *Cache) Repo() *Repo { return c.repo }

// Hook is the executors' side of the cache.
func (c *Cache) Hook() attempt.CacheHook { return c }

// ownerPrefix marks reservations the executors hold for an action, so the
// upkeep worker can tell them from an API client's.
const ownerPrefix = "action:"

func ownerOf(a *store.Action) string { return ownerPrefix + a.ActionKey.String() }

// actionOf is the action an executor reservation's owner names.
func actionOf(owner string) (store.ActionKey, bool) {
	rest, ok := strings.CutPrefix(owner, ownerPrefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 5 {
		return store.ActionKey{}, false
	}
	return store.RunKey{Org: parts[0], Project: parts[1], Domain: parts[2], RunName: parts[3]}.Action(parts[4]), true
}

func scopeOfAction(a *store.Action) Scope {
	return Scope{Org: a.Org, Project: a.Project, Domain: a.Domain}
}

// waitPoll is how often an action waiting for another's reservation looks
// again (bounded by the heartbeat: a holder that stopped is noticed then).
const waitPoll = 2 * time.Second

// key is a's cache key: the SDK's (sent with a child action) or, for a root
// action, the same computation over its stored inputs.
func (c *Cache) key(ctx context.Context, a *store.Action, spec *task.TaskSpec) (string, error) {
	if a.CacheKey != "" {
		return a.CacheKey, nil
	}
	c.mu.Lock()
	known, ok := c.rootKeys[a.ActionKey]
	c.mu.Unlock()
	if ok {
		return known, nil
	}
	k, err := c.blobs.Key(runlayout.InputFile(a.InputURI))
	if err != nil {
		return "", err
	}
	raw, err := c.blobs.Get(ctx, k)
	if err != nil {
		return "", err
	}
	in := &task.Inputs{}
	if err := proto.Unmarshal(raw, in); err != nil {
		return "", fmt.Errorf("the inputs of %s are unreadable: %w", a.ActionKey, err)
	}
	key := Key(spec.GetTaskTemplate(), in)
	c.mu.Lock()
	if len(c.rootKeys) >= 4096 { // bounded: drop everything rather than track recency
		clear(c.rootKeys)
	}
	c.rootKeys[a.ActionKey] = key
	c.mu.Unlock()
	return key, nil
}

// Check implements attempt.CacheHook: a hit, a wait for the holder of the
// reservation, or a miss the attempt computes.
func (c *Cache) Check(ctx context.Context, q attempt.CacheQuery) (attempt.CacheCheck, error) {
	a, md := q.Action, q.Spec.GetTaskTemplate().GetMetadata()
	key, err := c.key(ctx, a, q.Spec)
	if err != nil {
		if errors.Is(err, errs.ErrUnavailable) {
			return attempt.CacheCheck{}, err
		}
		c.log.WarnContext(ctx, "cache lookup skipped: no cache key", "action", a.ActionKey.String(), "err", err)
		return attempt.CacheCheck{Status: core.CatalogCacheStatus_CACHE_LOOKUP_FAILURE}, nil
	}
	sc := scopeOfAction(a)
	miss, result := core.CatalogCacheStatus_CACHE_MISS, "miss"
	if q.Overwrite {
		miss, result = core.CatalogCacheStatus_CACHE_SKIPPED, "skipped"
	} else if hit, ok, err := c.hit(ctx, a, sc, key, q); err != nil || ok {
		return hit, err
	}
	if !md.GetCacheSerializable() {
		c.metrics.lookups.WithLabelValues(result).Inc()
		return attempt.CacheCheck{Status: miss}, nil
	}
	owner := ownerOf(a)
	r, err := c.repo.Reserve(ctx, sc, key, owner, 0)
	if err != nil {
		return attempt.CacheCheck{}, err
	}
	if r.OwnerID != owner {
		c.metrics.lookups.WithLabelValues("wait").Inc()
		holder := strings.TrimPrefix(r.OwnerID, ownerPrefix)
		return attempt.CacheCheck{Status: miss, RetryAfter: min(waitPoll, c.repo.Heartbeat(0)),
			Wait: fmt.Sprintf("waiting for the cached outputs: %s computes them (serialized cache, reservation held until %s)",
				holder, r.ExpiresAt.Format(time.RFC3339))}, nil
	}
	// Look again now that the reservation is ours: a holder puts its
	// outputs before it releases, so one that finished between the first
	// lookup and the Reserve left an entry behind, and computing again
	// would break the serialized cache's promise of one computation.
	if !q.Overwrite {
		if hit, ok, err := c.hit(ctx, a, sc, key, q); err != nil || ok {
			if rerr := c.repo.ReleaseOwner(ctx, owner); rerr != nil {
				c.log.WarnContext(ctx, "releasing a cache reservation", "action", a.ActionKey.String(), "err", rerr)
			}
			return hit, err
		}
	}
	c.metrics.lookups.WithLabelValues(result).Inc()
	return attempt.CacheCheck{Status: miss}, nil
}

// hit looks key up and, when a live entry has outputs, copies them for a:
// ok says the check is a hit. An entry whose outputs are gone from storage
// is deleted and counts as a miss.
func (c *Cache) hit(ctx context.Context, a *store.Action, sc Scope, key string, q attempt.CacheQuery) (attempt.CacheCheck, bool, error) {
	e, err := c.lookup(ctx, sc, key, q.Scope, q.Spec.GetTaskTemplate().GetMetadata().GetCacheMaxAge().AsDuration())
	if err != nil || e == nil {
		return attempt.CacheCheck{}, false, err
	}
	dir, err := c.copyOutputs(ctx, a, e)
	switch {
	case err == nil:
		c.metrics.lookups.WithLabelValues("hit").Inc()
		if e.Scope() != sc {
			// Only with cache.crossProjectLookup: say whose outputs these are.
			c.log.InfoContext(ctx, "cache hit on another project's entry", "action", a.ActionKey.String(),
				"entry_project", e.Project, "entry_domain", e.Domain, "outputs", e.OutputURI)
		}
		return attempt.CacheCheck{Status: core.CatalogCacheStatus_CACHE_HIT, HitURI: dir}, true, nil
	case errors.Is(err, errs.ErrNotFound):
		// The outputs are gone from storage: the entry is useless.
		c.log.WarnContext(ctx, "cached outputs are gone; computing them again", "action", a.ActionKey.String(), "outputs", e.OutputURI)
		if err := c.repo.Delete(ctx, e.Scope(), e.CacheKey); err != nil && !errors.Is(err, errs.ErrNotFound) {
			return attempt.CacheCheck{}, false, err
		}
		return attempt.CacheCheck{}, false, nil
	default:
		return attempt.CacheCheck{}, false, err
	}
}

// copyOutputs copies the cached outputs of e into the directory of a's
// current attempt, which is where the SDK and the views read an action's
// outputs (the output directory follows from the action's name), and
// returns that directory.
func (c *Cache) copyOutputs(ctx context.Context, a *store.Action, e *Entry) (string, error) {
	dir := runlayout.AttemptDir(a.RunOutputBase, a.Name, uint32(a.Attempts))
	from, err := c.blobs.Key(runlayout.JoinURI(e.OutputURI, runlayout.OutputsFile))
	if err != nil {
		return "", fmt.Errorf("cached outputs %s lie outside storage: %w", e.OutputURI, errs.ErrNotFound)
	}
	to, err := c.blobs.Key(runlayout.JoinURI(dir, runlayout.OutputsFile))
	if err != nil {
		return "", err
	}
	raw, err := c.blobs.Get(ctx, from)
	if err != nil {
		return "", err
	}
	if err := c.blobs.Put(ctx, to, raw, nil); err != nil {
		return "", err
	}
	return dir, nil
}

// lookup returns the live entry of key (nil for none) for a run in sc:
// sc's own first, whatever the lookup scope, so another project's newer
// entry never beats the project's own. Only with the GLOBAL lookup scope and
// cache.crossProjectLookup on does a miss there look further, and then in
// sc's org and domain only. An entry older than maxAge (> 0, the task's
// cache max_age) misses.
func (c *Cache) lookup(ctx context.Context, sc Scope, key string, scope task.CacheLookupScope, maxAge time.Duration) (*Entry, error) {
	e, err := c.repo.Get(ctx, sc, key)
	if errors.Is(err, errs.ErrNotFound) && scope == task.CacheLookupScope_CACHE_LOOKUP_SCOPE_GLOBAL && c.crossProject {
		e, err = c.repo.LookupDomain(ctx, sc, key)
	}
	if errors.Is(err, errs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if maxAge > 0 && time.Since(e.UpdatedAt) > maxAge {
		return nil, nil
	}
	return e, nil
}

// Finish implements attempt.CacheHook: a success's outputs are cached
// (CACHE_POPULATED, or CACHE_PUT_FAILURE when they cannot be: the action
// still succeeded), and the action's reservations end.
func (c *Cache) Finish(ctx context.Context, q attempt.CacheQuery, succeeded bool, outDir string) core.CatalogCacheStatus {
	a := q.Action
	var st core.CatalogCacheStatus
	if q.Spec != nil && succeeded && outDir != "" {
		st = c.put(ctx, q, outDir)
	}
	if q.Spec == nil || q.Spec.GetTaskTemplate().GetMetadata().GetCacheSerializable() {
		if err := c.repo.ReleaseOwner(ctx, ownerOf(a)); err != nil {
			// The upkeep worker releases it later (its owner ended).
			c.log.WarnContext(ctx, "releasing a cache reservation", "action", a.ActionKey.String(), "err", err)
		}
	}
	return st
}

func (c *Cache) put(ctx context.Context, q attempt.CacheQuery, outDir string) core.CatalogCacheStatus {
	a, tmpl := q.Action, q.Spec.GetTaskTemplate()
	key, err := c.key(ctx, a, q.Spec)
	if err == nil {
		md, _ := proto.Marshal(&pb.Metadata{SourceIdentifier: tmpl.GetId(),
			KeyMap: &pb.KeyMapMetadata{Values: map[string]string{"action": a.ActionKey.String()}}})
		e := Entry{Org: a.Org, Project: a.Project, Domain: a.Domain, CacheKey: key, OutputURI: outDir,
			Metadata: md, TaskName: tmpl.GetId().GetName()}
		err = c.repo.Put(ctx, e, q.Overwrite, tmpl.GetMetadata().GetCacheMaxAge().AsDuration())
	}
	switch {
	case err == nil, errors.Is(err, errs.ErrAlreadyExists): // another identical action cached them first
		c.metrics.puts.WithLabelValues("populated").Inc()
		return core.CatalogCacheStatus_CACHE_POPULATED
	default:
		c.metrics.puts.WithLabelValues("failed").Inc()
		c.log.WarnContext(ctx, "caching the outputs failed; the action succeeded", "action", a.ActionKey.String(), "err", err)
		return core.CatalogCacheStatus_CACHE_PUT_FAILURE
	}
}

// Run is the upkeep worker: every heartbeat interval it extends the
// reservations of actions whose attempt runs (also after a manager restart
// re-adopted it) and releases those of actions that ended or are gone; every
// sweep interval it deletes expired reservations and entries.
func (c *Cache) Run(ctx context.Context) error {
	t := time.NewTicker(c.repo.Heartbeat(0))
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "cache reservation heartbeats", "err", err)
		}
		if time.Since(last) >= c.sweep {
			last = time.Now()
			if r, e, err := c.repo.Sweep(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "cache sweep", "err", err)
			} else if r+e > 0 {
				c.log.InfoContext(ctx, "cache sweep", "expired_reservations", r, "deleted_entries", e)
			}
		}
	}
}

// heartbeat extends or releases each executor reservation by the state of
// the action that owns it: one read of the reservations, one of the owners'
// phases, one write each for the extended and the released ones, however
// many reservations there are.
func (c *Cache) heartbeat(ctx context.Context) error {
	rs, err := c.repo.Reservations(ctx)
	if err != nil {
		return err
	}
	owners := map[store.ActionKey]string{}
	keys := make([]store.ActionKey, 0, len(rs))
	for _, r := range rs {
		key, ok := actionOf(r.OwnerID)
		if !ok {
			continue // an API client's: it heartbeats itself
		}
		if _, dup := owners[key]; !dup {
			owners[key] = r.OwnerID
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	phases, err := c.actions.Phases(ctx, keys)
	if err != nil {
		return err
	}
	var extend, release []string
	for _, key := range keys {
		switch p, ok := phases[key]; {
		case !ok || p.Terminal():
			release = append(release, owners[key])
		case p.Active():
			extend = append(extend, owners[key])
		}
	}
	n, err := c.repo.ExtendOwners(ctx, extend)
	c.metrics.heartbeats.Add(float64(n))
	if err != nil {
		return err
	}
	n, err = c.repo.ReleaseOwners(ctx, release)
	c.metrics.released.Add(float64(n))
	return err
}
