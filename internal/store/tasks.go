package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// TaskID identifies one version of a task.
type TaskID struct {
	Org     string
	Project string
	Domain  string
	Name    string
	Version string
}

func (id TaskID) String() string {
	return fmt.Sprintf("%s/%s/%s/%s@%s", id.Org, id.Project, id.Domain, id.Name, id.Version)
}

func (id TaskID) validate() error {
	if id.Project == "" || id.Domain == "" || id.Name == "" || id.Version == "" {
		return errs.Invalidf("task id %s: project, domain, name and version are required", id)
	}
	return nil
}

// Task is a deployed task version; its spec lives in task_specs.
type Task struct {
	ID              int64  `gorm:"primaryKey"`
	TaskID          TaskID `gorm:"embedded"`
	SpecDigest      string
	ShortName       string
	EnvironmentName string
	DeployedBy      string
	CreatedAt       time.Time
}

func (Task) TableName() string { return "tasks" }

type taskSpec struct {
	Digest    string `gorm:"primaryKey"`
	Spec      []byte
	CreatedAt time.Time
}

func (taskSpec) TableName() string { return "task_specs" }

// SpecDigest is the content address of spec bytes: sha256, hex.
func SpecDigest(spec []byte) string {
	sum := sha256.Sum256(spec)
	return hex.EncodeToString(sum[:])
}

// Tasks is the repository of task specs and deployed tasks.
type Tasks struct{ db *gorm.DB }

// PutSpec stores spec under digest, which must be SpecDigest(spec). Storing
// the same spec again is a no-op.
func (r *Tasks) PutSpec(ctx context.Context, digest string, spec []byte) error {
	return putSpec(r.db.WithContext(ctx), digest, spec)
}

func putSpec(tx *gorm.DB, digest string, spec []byte) error {
	if digest != SpecDigest(spec) {
		return errs.Invalidf("task spec digest %q does not match its content", digest)
	}
	row := taskSpec{Digest: digest, Spec: spec, CreatedAt: db.Now()}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("store task spec %s: %w", digest, db.Translate(err))
	}
	return nil
}

// GetSpec returns the spec bytes stored under digest.
func (r *Tasks) GetSpec(ctx context.Context, digest string) ([]byte, error) {
	var row taskSpec
	if err := r.db.WithContext(ctx).Where("digest = ?", digest).Take(&row).Error; err != nil {
		return nil, fmt.Errorf("task spec %s: %w", digest, db.Translate(err))
	}
	return row.Spec, nil
}

// GetSpecs returns the spec bytes stored under each of digests, in one
// query (a listing page's specs); a digest not stored is absent.
func (r *Tasks) GetSpecs(ctx context.Context, digests []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(digests))
	if len(digests) == 0 {
		return out, nil
	}
	var rows []taskSpec
	if err := r.db.WithContext(ctx).Where("digest IN ?", digests).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("task specs: %w", db.Translate(err))
	}
	for _, row := range rows {
		out[row.Digest] = row.Spec
	}
	return out, nil
}

// Deploy records t, storing spec (if not nil) in the same transaction.
// Deploying the same identity with the same digest again returns the
// existing row and created=false; with a different digest it fails with
// errs.ErrAlreadyExists (a version is immutable).
func (r *Tasks) Deploy(ctx context.Context, t Task, spec []byte) (*Task, bool, error) {
	if err := t.TaskID.validate(); err != nil {
		return nil, false, err
	}
	if t.SpecDigest == "" {
		return nil, false, errs.Invalidf("task %s: spec digest is required", t.TaskID)
	}
	var out *Task
	created := false
	err := db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		if spec != nil {
			if err := putSpec(tx, t.SpecDigest, spec); err != nil {
				return err
			}
		}
		t.ID, t.CreatedAt = 0, db.Now()
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&t)
		if res.Error != nil {
			return fmt.Errorf("deploy task %s: %w", t.TaskID, db.Translate(res.Error))
		}
		if res.RowsAffected == 1 {
			out, created = &t, true
			return nil
		}
		existing, err := getTask(tx, t.TaskID)
		if err != nil {
			return err
		}
		if existing.SpecDigest != t.SpecDigest {
			return fmt.Errorf("task %s is already deployed with a different spec: %w", t.TaskID, errs.ErrAlreadyExists)
		}
		out = existing
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// Get returns one task version.
func (r *Tasks) Get(ctx context.Context, id TaskID) (*Task, error) {
	return getTask(r.db.WithContext(ctx), id)
}

func getTask(tx *gorm.DB, id TaskID) (*Task, error) {
	var t Task
	err := tx.Where("org = ? AND project = ? AND domain = ? AND name = ? AND version = ?",
		id.Org, id.Project, id.Domain, id.Name, id.Version).Take(&t).Error
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, db.Translate(err))
	}
	return &t, nil
}

// Latest returns the most recently deployed version of a task name.
func (r *Tasks) Latest(ctx context.Context, org, project, domain, name string) (*Task, error) {
	var t Task
	err := r.db.WithContext(ctx).
		Where("org = ? AND project = ? AND domain = ? AND name = ?", org, project, domain, name).
		Order("created_at DESC, id DESC").Take(&t).Error
	if err != nil {
		return nil, fmt.Errorf("task %s/%s/%s: %w", project, domain, name, db.Translate(err))
	}
	return &t, nil
}

// TaskFilter narrows List. Org is always matched; empty Project, Domain
// or Name match any.
type TaskFilter struct {
	Org     string
	Project string
	Domain  string
	Name    string
	// DeployedBy, when not empty, keeps versions deployed by one of these
	// subjects. It filters the rows the scope's index yields.
	DeployedBy []string
	// DeployedAfter (inclusive) and DeployedBefore (exclusive) bound the
	// deploy time, created_at; zero means unbounded.
	DeployedAfter  time.Time
	DeployedBefore time.Time
	// NameContains are substrings the name must contain; like DeployedBy
	// they filter the rows the scope's index yields.
	NameContains []Substring
	// TriggerTypes, when not nil, keeps versions with a live trigger of one
	// of these automation types ("TYPE_SCHEDULE"); "TYPE_NONE" also keeps
	// versions without any trigger.
	TriggerTypes []string
}

// List returns task versions, newest first.
func (r *Tasks) List(ctx context.Context, f TaskFilter, page Page) ([]Task, string, error) {
	const query = "tasks"
	c, err := decodeCursor(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	q := r.db.WithContext(ctx).Where("org = ?", f.Org)
	q = whereSet(q, "project", f.Project)
	q = whereSet(q, "domain", f.Domain)
	q = whereSet(q, "name", f.Name)
	if len(f.DeployedBy) > 0 {
		q = q.Where("deployed_by IN ?", f.DeployedBy)
	}
	for _, sub := range f.NameContains {
		q = whereContains(q, "name", sub)
	}
	if f.TriggerTypes != nil {
		q = whereTriggerTypes(q, f.TriggerTypes)
	}
	if !f.DeployedAfter.IsZero() {
		q = q.Where("created_at >= ?", db.Time(f.DeployedAfter))
	}
	if !f.DeployedBefore.IsZero() {
		q = q.Where("created_at < ?", db.Time(f.DeployedBefore))
	}
	if c != nil {
		q = q.Where("(created_at, id) < (?, ?)", c.time(), c.ID)
	}
	var rows []Task
	limit := page.limit()
	if err := q.Order("created_at DESC, id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("list tasks: %w", db.Translate(err))
	}
	rows, next := cut(rows, limit, func(t Task) cursor {
		return cursor{Query: query, Time: t.CreatedAt.UnixMicro(), ID: t.ID}
	})
	return rows, next, nil
}

// whereSet adds "col = v" unless v is empty (meaning "any").
func whereSet(q *gorm.DB, col, v string) *gorm.DB {
	if v == "" {
		return q
	}
	return q.Where(col+" = ?", v)
}
