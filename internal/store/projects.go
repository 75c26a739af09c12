package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// ProjectState mirrors flyteidl2's ProjectState enum.
type ProjectState int32

const (
	ProjectActive          ProjectState = 0
	ProjectArchived        ProjectState = 1
	ProjectSystemGenerated ProjectState = 2
	ProjectSystemArchived  ProjectState = 3
)

// Archived reports whether the state refuses new work.
func (s ProjectState) Archived() bool { return s == ProjectArchived || s == ProjectSystemArchived }

// Project is a row of projects; (Org, Name) is its identity.
type Project struct {
	ID          int64 `gorm:"primaryKey"`
	Org         string
	Name        string
	DisplayName string
	Description string
	Labels      map[string]string `gorm:"serializer:json"`
	State       ProjectState
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (Project) TableName() string { return "projects" }

// Domain is one of the (global) domains every project has.
type Domain struct {
	ID   string
	Name string
}

// Projects is the projects repository.
type Projects struct{ db *gorm.DB }

// Get returns the project (org, name).
func (r *Projects) Get(ctx context.Context, org, name string) (*Project, error) {
	var p Project
	err := r.db.WithContext(ctx).Where("org = ? AND name = ?", org, name).Take(&p).Error
	if err != nil {
		return nil, fmt.Errorf("project %q: %w", name, db.Translate(err))
	}
	return &p, nil
}

// ProjectFilter narrows List. Org is always matched ("" is a valid org).
type ProjectFilter struct {
	Org string
	// States the project may be in; nil means any. NoProjectState alone
	// matches no project.
	States []ProjectState
	// Text are conditions on the columns in ProjectTextColumns.
	Text []TextCond
}

// NoProjectState is a state no project is in: a States filter of it alone
// matches nothing.
const NoProjectState ProjectState = -1

// ProjectTextColumns are the text columns a ProjectFilter may test.
var ProjectTextColumns = []string{"name", "display_name", "description"}

// List returns projects of an org ordered by name.
func (r *Projects) List(ctx context.Context, f ProjectFilter, page Page) ([]Project, string, error) {
	const query = "projects"
	c, err := decodeCursor(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	q := r.db.WithContext(ctx).Where("org = ?", f.Org)
	if f.States != nil {
		q = q.Where("state IN ?", f.States)
	}
	for _, c := range f.Text {
		if !slices.Contains(ProjectTextColumns, c.Column) {
			return nil, "", errs.Invalidf("projects cannot be filtered by %q", c.Column)
		}
		q = whereText(q, c)
	}
	if c != nil {
		q = q.Where("(name, id) > (?, ?)", c.Str, c.ID)
	}
	var rows []Project
	limit := page.limit()
	if err := q.Order("name, id").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("list projects: %w", db.Translate(err))
	}
	rows, next := cut(rows, limit, func(p Project) cursor { return cursor{Query: query, Str: p.Name, ID: p.ID} })
	return rows, next, nil
}

// Create inserts p; an existing (Org, Name) yields errs.ErrAlreadyExists.
func (r *Projects) Create(ctx context.Context, p *Project) error {
	if p.Name == "" {
		return errs.Invalidf("project name is required")
	}
	now := db.Now()
	p.ID, p.CreatedAt, p.UpdatedAt = 0, now, now
	if err := r.db.WithContext(ctx).Create(p).Error; err != nil {
		return fmt.Errorf("project %q: %w", p.Name, db.Translate(err))
	}
	return nil
}

// EnsureExists creates project (org, name) with defaults unless it exists,
// and reports whether it did. Safe under concurrent callers.
func (r *Projects) EnsureExists(ctx context.Context, org, name string) (*Project, bool, error) {
	if name == "" {
		return nil, false, errs.Invalidf("project name is required")
	}
	now := db.Now()
	p := Project{Org: org, Name: name, DisplayName: name, CreatedAt: now, UpdatedAt: now}
	res := r.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&p)
	if res.Error != nil {
		return nil, false, fmt.Errorf("project %q: %w", name, db.Translate(res.Error))
	}
	got, err := r.Get(ctx, org, name)
	return got, res.RowsAffected == 1, err
}

// Update overwrites the mutable fields of project (p.Org, p.Name).
func (r *Projects) Update(ctx context.Context, p *Project) error {
	p.UpdatedAt = db.Now()
	res := r.db.WithContext(ctx).Model(&Project{}).
		Where("org = ? AND name = ?", p.Org, p.Name).
		Select("display_name", "description", "labels", "state", "updated_at").
		Updates(p)
	if res.Error != nil {
		return fmt.Errorf("project %q: %w", p.Name, db.Translate(res.Error))
	}
	if res.RowsAffected == 0 {
		return errs.NotFoundf("project %q", p.Name)
	}
	return nil
}

// Domains lists the domains in their canonical order.
func (r *Projects) Domains(ctx context.Context) ([]Domain, error) {
	var out []Domain
	if err := r.db.WithContext(ctx).Table("domains").Select("id, name").Order("position").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list domains: %w", db.Translate(err))
	}
	return out, nil
}

// AdmitWork is the one rule for whether new work (a run, a task version, the
// inputs of a run) may go to project (org, name) in domain. Every entry point
// that creates work asks it before writing anything.
//
//   - domain must be one of the manager's (global) domains, else
//     errs.ErrInvalid naming domainField and listing the domains;
//   - the project must exist, else it is created when autoCreate
//     (projects.autoCreate) and errs.ErrNotFound otherwise;
//   - it must not be archived, else errs.ErrPrecondition.
//
// The domain is checked first so that a request refused for its domain does
// not create its project. created reports whether this call created it.
func (r *Projects) AdmitWork(ctx context.Context, org, name, domainField, domain string, autoCreate bool) (p *Project, created bool, err error) {
	domains, err := r.Domains(ctx)
	if err != nil {
		return nil, false, err
	}
	names := make([]string, len(domains))
	known := false
	for i, d := range domains {
		names[i] = d.ID
		known = known || d.ID == domain
	}
	if !known {
		return nil, false, errs.Invalidf("%s %q is not a domain of this manager (domains: %s)", domainField, domain, strings.Join(names, ", "))
	}
	if autoCreate {
		p, created, err = r.EnsureExists(ctx, org, name)
	} else {
		p, err = r.Get(ctx, org, name)
		if errors.Is(err, errs.ErrNotFound) {
			return nil, false, errs.NotFoundf("project %q does not exist; create it (flyte create project --id %s --name %s) "+
				"or enable projects.autoCreate", name, name, name)
		}
	}
	if err != nil {
		return nil, false, err
	}
	if p.State.Archived() {
		return nil, false, fmt.Errorf("project %q is archived; unarchive it to use it: %w", name, errs.ErrPrecondition)
	}
	return p, created, nil
}
