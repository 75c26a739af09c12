package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// Scope is what a cache key is unique in. The reference drops org; we keep
// it, so two orgs sharing a manager never read each other's outputs.
type Scope struct {
	Org     string
	Project string
	Domain  string
}

func (s Scope) String() string { return s.Org + "/" + s.Project + "/" + s.Domain }

// Entry is a row of cache_outputs: the outputs of one cache key.
type Entry struct {
	Org       string `gorm:"primaryKey"`
	Project   string `gorm:"primaryKey"`
	Domain    string `gorm:"primaryKey"`
	CacheKey  string `gorm:"primaryKey"`
	OutputURI string `gorm:"column:output_uri"`
	Metadata  []byte // serialized cacheservice.Metadata
	TaskName  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (Entry) TableName() string { return "cache_outputs" }

// Scope is the scope the entry lives in.
func (e *Entry) Scope() Scope { return Scope{e.Org, e.Project, e.Domain} }

// Reservation is a row of cache_reservations: who computes a key's outputs
// now, and until when it is trusted to without a heartbeat.
type Reservation struct {
	Org              string `gorm:"primaryKey"`
	Project          string `gorm:"primaryKey"`
	Domain           string `gorm:"primaryKey"`
	CacheKey         string `gorm:"primaryKey"`
	OwnerID          string `gorm:"column:owner_id"`
	HeartbeatSeconds int64
	ExpiresAt        time.Time
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

func (Reservation) TableName() string { return "cache_reservations" }

// Limits are the server-side bounds of the cache (config section cache:).
type Limits struct {
	// TTL expires entries this long after their last write (0: never).
	TTL time.Duration
	// MaxEntries bounds the entries; the oldest are evicted (0: no bound).
	MaxEntries int
	// MaxHeartbeat caps the heartbeat interval a reservation asks for.
	MaxHeartbeat time.Duration
	// Grace is how many heartbeat intervals a reservation outlives its last
	// heartbeat.
	Grace int
}

// Repo is the cache's storage over the shared database.
type Repo struct {
	db  *gorm.DB
	lim Limits
}

// NewRepo builds the repository over g.
func NewRepo(g *gorm.DB, lim Limits) *Repo {
	if lim.MaxHeartbeat <= 0 {
		lim.MaxHeartbeat = 10 * time.Second
	}
	if lim.Grace <= 0 {
		lim.Grace = 3
	}
	return &Repo{db: g, lim: lim}
}

func inScope(q *gorm.DB, s Scope, key string) *gorm.DB {
	return q.Where("org = ? AND project = ? AND domain = ? AND cache_key = ?", s.Org, s.Project, s.Domain, key)
}

// Get returns the live entry of key in s (errs.ErrNotFound if there is
// none, or it outlived the time-to-live).
func (r *Repo) Get(ctx context.Context, s Scope, key string) (*Entry, error) {
	var e Entry
	q := inScope(r.db.WithContext(ctx), s, key)
	if r.lim.TTL > 0 {
		q = q.Where("updated_at > ?", db.Now().Add(-r.lim.TTL))
	}
	if err := q.Take(&e).Error; err != nil {
		if errors.Is(db.Translate(err), errs.ErrNotFound) {
			return nil, fmt.Errorf("no cached outputs for key %q in %s: %w", key, s, errs.ErrNotFound)
		}
		return nil, db.Translate(err)
	}
	return &e, nil
}

// LookupDomain returns the newest live entry of key in any project of s's
// org and domain (the GLOBAL lookup scope where the operator allows it to
// cross projects). It never looks in another domain: a development entry
// must not serve a production run.
func (r *Repo) LookupDomain(ctx context.Context, s Scope, key string) (*Entry, error) {
	var e Entry
	q := r.db.WithContext(ctx).Where("org = ? AND domain = ? AND cache_key = ?", s.Org, s.Domain, key)
	if r.lim.TTL > 0 {
		q = q.Where("updated_at > ?", db.Now().Add(-r.lim.TTL))
	}
	if err := q.Order("updated_at DESC").Take(&e).Error; err != nil {
		if errors.Is(db.Translate(err), errs.ErrNotFound) {
			return nil, fmt.Errorf("no cached outputs for key %q in org %q, domain %q: %w", key, s.Org, s.Domain, errs.ErrNotFound)
		}
		return nil, db.Translate(err)
	}
	return &e, nil
}

// Put stores e. An existing entry is replaced only when overwrite is set,
// or it is older than maxAge (> 0), or it outlived the time-to-live;
// otherwise errs.ErrAlreadyExists. created is kept from the entry it
// replaces unless e carries one.
func (r *Repo) Put(ctx context.Context, e Entry, overwrite bool, maxAge time.Duration) error {
	now := db.Now()
	s := e.Scope()
	return db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		var old Entry
		err := inScope(tx, s, e.CacheKey).Take(&old).Error
		switch {
		case err == nil:
			stale := (maxAge > 0 && old.UpdatedAt.Before(now.Add(-maxAge))) ||
				(r.lim.TTL > 0 && !old.UpdatedAt.After(now.Add(-r.lim.TTL)))
			if !overwrite && !stale {
				return fmt.Errorf("outputs for key %q in %s are cached already; set overwrite to replace them: %w", e.CacheKey, s, errs.ErrAlreadyExists)
			}
			if e.CreatedAt.IsZero() {
				e.CreatedAt = old.CreatedAt
			}
		case errors.Is(db.Translate(err), errs.ErrNotFound):
		default:
			return db.Translate(err)
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = now
		}
		e.CreatedAt, e.UpdatedAt = db.Time(e.CreatedAt), now
		return db.Translate(tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&e).Error)
	})
}

// evict deletes the oldest entries beyond MaxEntries and returns how many.
// The sweep calls it, not every Put: counting a large table per write would
// cost more than a bound that holds from one sweep to the next.
func (r *Repo) evict(ctx context.Context) (int, error) {
	if r.lim.MaxEntries <= 0 {
		return 0, nil
	}
	var n int64
	if err := r.db.WithContext(ctx).Model(&Entry{}).Count(&n).Error; err != nil {
		return 0, db.Translate(err)
	}
	over := int(n) - r.lim.MaxEntries
	if over <= 0 {
		return 0, nil
	}
	var oldest []Entry
	if err := r.db.WithContext(ctx).Select("org, project, domain, cache_key").Order("updated_at, cache_key").Limit(over).Find(&oldest).Error; err != nil {
		return 0, db.Translate(err)
	}
	return r.deleteEntries(ctx, oldest)
}

func (r *Repo) deleteEntries(ctx context.Context, es []Entry) (int, error) {
	n := 0
	for i := range es {
		res := inScope(r.db.WithContext(ctx), es[i].Scope(), es[i].CacheKey).Delete(&Entry{})
		if res.Error != nil {
			return n, db.Translate(res.Error)
		}
		n += int(res.RowsAffected)
	}
	return n, nil
}

// Delete removes the entry of key in s (errs.ErrNotFound if there is none).
// Its blobs stay: they may be the outputs of the action that produced them.
func (r *Repo) Delete(ctx context.Context, s Scope, key string) error {
	res := inScope(r.db.WithContext(ctx), s, key).Delete(&Entry{})
	if res.Error != nil {
		return db.Translate(res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("no cached outputs for key %q in %s: %w", key, s, errs.ErrNotFound)
	}
	return nil
}

// Heartbeat is the interval a reservation that asked for want gets:
// capped by MaxHeartbeat, which is also the default.
func (r *Repo) Heartbeat(want time.Duration) time.Duration {
	if want <= 0 || want > r.lim.MaxHeartbeat {
		return r.lim.MaxHeartbeat
	}
	return want
}

// Reserve gets or extends owner's reservation of key in s. It returns the
// reservation as it stands: owner's own (new or extended), or another
// owner's that has not expired — the caller compares OwnerID.
func (r *Repo) Reserve(ctx context.Context, s Scope, key, owner string, heartbeat time.Duration) (*Reservation, error) {
	hb := r.Heartbeat(heartbeat)
	now := db.Now()
	exp := now.Add(hb * time.Duration(r.lim.Grace))
	secs := int64((hb + time.Second - 1) / time.Second)
	var out Reservation
	// Waiters ask again and again while another owner holds it: answer
	// them with a read, not a write transaction.
	if err := inScope(r.db.WithContext(ctx), s, key).Take(&out).Error; err == nil && out.OwnerID != owner && out.ExpiresAt.After(now) {
		return &out, nil
	}
	err := db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		row := Reservation{Org: s.Org, Project: s.Project, Domain: s.Domain, CacheKey: key, OwnerID: owner,
			HeartbeatSeconds: secs, ExpiresAt: exp, CreatedAt: now, UpdatedAt: now}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil {
			return db.Translate(res.Error)
		}
		if res.RowsAffected == 0 {
			// Held: take it over if it expired or is ours already.
			res = inScope(tx.Model(&Reservation{}), s, key).Where("expires_at <= ? OR owner_id = ?", now, owner).
				Updates(map[string]any{"owner_id": owner, "heartbeat_seconds": secs, "expires_at": exp, "updated_at": now})
			if res.Error != nil {
				return db.Translate(res.Error)
			}
		}
		return db.Translate(inScope(tx, s, key).Take(&out).Error)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Release ends owner's reservation of key in s; one that is not there, or
// is another owner's, is left alone (releasing twice is fine).
func (r *Repo) Release(ctx context.Context, s Scope, key, owner string) error {
	return db.Translate(inScope(r.db.WithContext(ctx), s, key).Where("owner_id = ?", owner).Delete(&Reservation{}).Error)
}

// ExtendOwners extends, in one statement, the reservations the owners hold
// by a full heartbeat (the executors' reservations all take the default).
// A reservation that is gone (released, or swept once expired) is not made
// again: its owner's next lookup reserves it afresh.
func (r *Repo) ExtendOwners(ctx context.Context, owners []string) (int, error) {
	if len(owners) == 0 {
		return 0, nil
	}
	hb := r.Heartbeat(0)
	now := db.Now()
	res := r.db.WithContext(ctx).Model(&Reservation{}).Where("owner_id IN ?", owners).
		Updates(map[string]any{"heartbeat_seconds": int64(hb / time.Second), "expires_at": now.Add(hb * time.Duration(r.lim.Grace)), "updated_at": now})
	return int(res.RowsAffected), db.Translate(res.Error)
}

// ReleaseOwners ends, in one statement, every reservation the owners hold.
func (r *Repo) ReleaseOwners(ctx context.Context, owners []string) (int, error) {
	if len(owners) == 0 {
		return 0, nil
	}
	res := r.db.WithContext(ctx).Where("owner_id IN ?", owners).Delete(&Reservation{})
	return int(res.RowsAffected), db.Translate(res.Error)
}

// ReleaseOwner ends every reservation owner holds.
func (r *Repo) ReleaseOwner(ctx context.Context, owner string) error {
	return db.Translate(r.db.WithContext(ctx).Where("owner_id = ?", owner).Delete(&Reservation{}).Error)
}

// Reservations lists every reservation (a handful: one per serialized
// computation in flight).
func (r *Repo) Reservations(ctx context.Context) ([]Reservation, error) {
	var out []Reservation
	err := r.db.WithContext(ctx).Order("cache_key").Limit(10000).Find(&out).Error
	return out, db.Translate(err)
}

// Sweep deletes expired reservations, the entries past the time-to-live
// and the oldest entries beyond MaxEntries, and returns how many
// reservations and entries it deleted.
func (r *Repo) Sweep(ctx context.Context) (reservations, entries int, err error) {
	now := db.Now()
	res := r.db.WithContext(ctx).Where("expires_at <= ?", now).Delete(&Reservation{})
	if res.Error != nil {
		return 0, 0, db.Translate(res.Error)
	}
	reservations = int(res.RowsAffected)
	if r.lim.TTL > 0 {
		res = r.db.WithContext(ctx).Where("updated_at <= ?", now.Add(-r.lim.TTL)).Delete(&Entry{})
		if res.Error != nil {
			return reservations, 0, db.Translate(res.Error)
		}
		entries = int(res.RowsAffected)
	}
	evicted, err := r.evict(ctx)
	return reservations, entries + evicted, err
}

// Purge deletes the entries of project and domain (in org), only the task's
// when task is not "", and returns them; with dryRun it deletes nothing.
func (r *Repo) Purge(ctx context.Context, s Scope, task string, dryRun bool) ([]Entry, error) {
	q := r.db.WithContext(ctx).Where("org = ? AND project = ? AND domain = ?", s.Org, s.Project, s.Domain)
	if task != "" {
		q = q.Where("task_name = ?", task)
	}
	var es []Entry
	if err := q.Order("task_name, cache_key").Find(&es).Error; err != nil {
		return nil, db.Translate(err)
	}
	if dryRun {
		return es, nil
	}
	_, err := r.deleteEntries(ctx, es)
	return es, err
}
