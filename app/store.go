package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gorm.io/gorm"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// Key names one app (the org "" is the local org, see ident.Org).
type Key = appruntime.Key

// row is a row of apps (migration 0013).
type row struct {
	ID        int64 `gorm:"primaryKey"`
	Org       string
	Project   string
	Domain    string
	Name      string
	Revision  uint64
	Version   uint64
	Spec      []byte
	Meta      []byte
	Status    []byte
	Phase     int32
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (row) TableName() string { return "apps" }

func (r *row) key() Key { return Key{Org: r.Org, Project: r.Project, Domain: r.Domain, Name: r.Name} }

// app is the row as the API's App, with its id in the org spelling org.
func (r *row) app(org string) (*pb.App, error) {
	a := &pb.App{Metadata: &pb.Meta{}, Spec: &pb.Spec{}, Status: &pb.Status{}}
	for _, part := range []struct {
		b []byte
		m proto.Message
	}{{r.Spec, a.Spec}, {r.Meta, a.Metadata}, {r.Status, a.Status}} {
		if err := proto.Unmarshal(part.b, part.m); err != nil {
			return nil, fmt.Errorf("app %s: stored record unreadable: %w", r.key(), err)
		}
	}
	a.Metadata.Id = &pb.Identifier{Org: org, Project: r.Project, Domain: r.Domain, Name: r.Name}
	a.Metadata.Revision = r.Revision
	a.Status.CreatedAt = timestamppb.New(r.CreatedAt)
	a.Status.LastUpdatedAt = timestamppb.New(r.UpdatedAt)
	return a, nil
}

// fill sets the row's stored parts from a (its id and revision excepted).
func (r *row) fill(a *pb.App) error {
	meta := proto.Clone(a.GetMetadata()).(*pb.Meta)
	if meta == nil {
		meta = &pb.Meta{}
	}
	meta.Id, meta.Revision = nil, 0
	status := proto.Clone(a.GetStatus()).(*pb.Status)
	if status == nil {
		status = &pb.Status{}
	}
	status.CreatedAt, status.LastUpdatedAt = nil, nil
	opts := proto.MarshalOptions{Deterministic: true}
	var err error
	if r.Spec, err = opts.Marshal(a.GetSpec()); err != nil {
		return err
	}
	if r.Meta, err = opts.Marshal(meta); err != nil {
		return err
	}
	if r.Status, err = opts.Marshal(status); err != nil {
		return err
	}
	r.Phase = int32(lastStatus(status))
	r.CreatedBy = creatorOf(a.GetSpec())
	return nil
}

// lastStatus is the deployment status of the newest condition.
func lastStatus(s *pb.Status) pb.Status_DeploymentStatus {
	if c := s.GetConditions(); len(c) > 0 {
		return c[len(c)-1].GetDeploymentStatus()
	}
	return pb.Status_DEPLOYMENT_STATUS_UNSPECIFIED
}

// Store is the apps repository.
type Store struct {
	db *gorm.DB
}

// NewStore returns the repository over g.
func NewStore(g *gorm.DB) *Store { return &Store{db: g} }

func where(q *gorm.DB, k Key) *gorm.DB {
	return q.Where("org = ? AND project = ? AND domain = ? AND name = ?", k.Org, k.Project, k.Domain, k.Name)
}

// Create stores a new app at revision 1; an existing one yields
// errs.ErrAlreadyExists.
func (s *Store) Create(ctx context.Context, k Key, a *pb.App) (*row, error) {
	now := db.Now()
	r := &row{Org: k.Org, Project: k.Project, Domain: k.Domain, Name: k.Name, Revision: 1, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := r.fill(a); err != nil {
		return nil, err
	}
	if err := s.db.WithContext(ctx).Create(r).Error; err != nil {
		err = db.Translate(err)
		if errors.Is(err, errs.ErrAlreadyExists) {
			return nil, fmt.Errorf("app %s exists already (update it, or delete it first): %w", k, errs.ErrAlreadyExists)
		}
		return nil, fmt.Errorf("create app: %w", err)
	}
	return r, nil
}

// Get returns the app's row.
func (s *Store) Get(ctx context.Context, k Key) (*row, error) {
	var r row
	if err := where(s.db.WithContext(ctx), k).Take(&r).Error; err != nil {
		if err = db.Translate(err); errors.Is(err, errs.ErrNotFound) {
			return nil, errs.NotFoundf("app %s", k)
		}
		return nil, fmt.Errorf("get app: %w", err)
	}
	return &r, nil
}

// errUnchanged from a change function leaves the row as it is.
var errUnchanged = errors.New("unchanged")

// Change reads the app, lets change edit a copy of it (returning
// errUnchanged to leave it be, or another error to fail), and writes the
// copy back unless the row was written meanwhile, in which case it tries
// again from the new row. It returns the row before and after (the same
// when nothing changed).
func (s *Store) Change(ctx context.Context, k Key, change func(r *row) error) (old, cur *row, err error) {
	for range 20 {
		old, err = s.Get(ctx, k)
		if err != nil {
			return nil, nil, err
		}
		next := *old
		if err := change(&next); errors.Is(err, errUnchanged) {
			return old, old, nil
		} else if err != nil {
			return nil, nil, err
		}
		next.Version = old.Version + 1
		next.UpdatedAt = db.Now()
		res := s.db.WithContext(ctx).Model(&row{}).Where("id = ? AND version = ?", old.ID, old.Version).
			Select("revision", "version", "spec", "meta", "status", "phase", "created_by", "updated_at").Updates(&next)
		if res.Error != nil {
			return nil, nil, fmt.Errorf("update app: %w", db.Translate(res.Error))
		}
		if res.RowsAffected == 1 {
			return old, &next, nil
		}
	}
	return nil, nil, fmt.Errorf("app %s is being changed by many writers at once; try again: %w", k, errs.ErrConflict)
}

// Delete removes the app and returns its last row; a missing one yields
// errs.ErrNotFound.
func (s *Store) Delete(ctx context.Context, k Key) (*row, error) {
	r, err := s.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	res := s.db.WithContext(ctx).Where("id = ?", r.ID).Delete(&row{})
	if res.Error != nil {
		return nil, fmt.Errorf("delete app: %w", db.Translate(res.Error))
	}
	if res.RowsAffected == 0 {
		return nil, errs.NotFoundf("app %s", k)
	}
	return r, nil
}

// Filter selects apps of a listing. Empty fields select everything.
type Filter struct {
	Org, Project, Domain string
	AllOrgs              bool // Org is ignored (the runtime's start)
	Phases               []int32
	CreatedBy            []string
	NewestFirst          bool
}

func (f Filter) apply(q *gorm.DB) *gorm.DB {
	if !f.AllOrgs {
		q = q.Where("org = ?", f.Org)
	}
	if f.Project != "" {
		q = q.Where("project = ?", f.Project)
	}
	if f.Domain != "" {
		q = q.Where("domain = ?", f.Domain)
	}
	if len(f.Phases) > 0 {
		q = q.Where("phase IN ?", f.Phases)
	}
	if len(f.CreatedBy) > 0 {
		q = q.Where("created_by IN ?", f.CreatedBy)
	}
	return q
}

// List returns one page of the apps f selects, in creation order (or
// newest first), and the next page's token ("" after the last).
func (s *Store) List(ctx context.Context, f Filter, page store.Page) ([]*row, string, error) {
	query := "apps"
	if f.NewestFirst {
		query = "apps-desc"
	}
	after, err := store.DecodeNameToken(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	q := f.apply(s.db.WithContext(ctx))
	order := "id"
	if f.NewestFirst {
		order = "id DESC"
		if after != nil {
			q = q.Where("id < ?", after.ID)
		}
	} else if after != nil {
		q = q.Where("id > ?", after.ID)
	}
	limit := page.Size()
	var rows []*row
	if err := q.Order(order).Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("list apps: %w", db.Translate(err))
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = store.NameToken(query, "", rows[limit-1].ID)
	}
	return rows, next, nil
}

// Count returns how many apps f selects.
func (s *Store) Count(ctx context.Context, f Filter) (int64, error) {
	var n int64
	q := f.apply(s.db.WithContext(ctx).Model(&row{}))
	if err := q.Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count apps: %w", db.Translate(err))
	}
	return n, nil
}

// creatorOf is the subject of the spec's creator: a user's or an
// application's id ("" when the spec names none).
func creatorOf(s *pb.Spec) string {
	c := s.GetCreator()
	if u := c.GetUser(); u != nil {
		return u.GetId().GetSubject()
	}
	return c.GetApplication().GetId().GetSubject()
}
