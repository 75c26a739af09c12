package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// TriggerKey names a trigger: a name unique among one task's triggers.
type TriggerKey struct {
	Org      string
	Project  string
	Domain   string
	TaskName string
	Name     string
}

func (k TriggerKey) String() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s", k.Org, k.Project, k.Domain, k.TaskName, k.Name)
}

func (k TriggerKey) validate() error {
	if k.Project == "" || k.Domain == "" || k.TaskName == "" || k.Name == "" {
		return errs.Invalidf("trigger %s: project, domain, task name and name are required", k)
	}
	return nil
}

// Automation types as stored (the enum's names).
const (
	TriggerTypeNone     = "TYPE_NONE"
	TriggerTypeSchedule = "TYPE_SCHEDULE"
)

// ErrTriggerRevision is a deploy that named a revision the trigger no
// longer has: FAILED_PRECONDITION, with the text the official UI retries on.
var ErrTriggerRevision = fmt.Errorf("optimistic lock failure: the trigger was changed since that revision; read it again and retry: %w", errs.ErrPrecondition)

// Trigger is one stored trigger. Spec and AutomationSpec are serialized
// protos the store does not read.
type Trigger struct {
	ID             int64      `gorm:"primaryKey"`
	TriggerKey     TriggerKey `gorm:"embedded"`
	TaskVersion    string
	Revision       int64
	Active         bool
	AutomationType string
	Spec           []byte
	AutomationSpec []byte
	Description    string
	DeployedBy     string
	UpdatedBy      string
	DeployedAt     time.Time
	UpdatedAt      time.Time
	ActiveSince    time.Time
	LastSlot       *time.Time
	TriggeredAt    *time.Time
	DeletedAt      *time.Time
}

func (Trigger) TableName() string { return "triggers" }

// sameContent reports whether a deploy of t over existing changes nothing.
func (t *Trigger) sameContent(existing *Trigger) bool {
	return existing.DeletedAt == nil && t.TaskVersion == existing.TaskVersion && t.Active == existing.Active &&
		t.AutomationType == existing.AutomationType && bytes.Equal(t.Spec, existing.Spec) &&
		bytes.Equal(t.AutomationSpec, existing.AutomationSpec) && t.Description == existing.Description
}

// TriggerRun records which trigger made a run, and for which scheduled
// time (nil: a run by name).
type TriggerRun struct {
	RunKey      `gorm:"embedded"`
	TriggerID   int64
	Revision    int64
	ScheduledAt *time.Time
	CreatedAt   time.Time
}

func (TriggerRun) TableName() string { return "trigger_runs" }

// Triggers is the repository of triggers.
type Triggers struct{ db *gorm.DB }

// Deploy creates or replaces the trigger t names (a deleted one comes
// back), bumping its revision. revision > 0 is an optimistic lock: the
// trigger must be at that revision (ErrTriggerRevision otherwise). A deploy
// that changes nothing returns the trigger as it is. The activation anchor
// (ActiveSince) moves only when the trigger becomes active or its automation
// changes, so redeploying the same schedule keeps its rhythm.
func (r *Triggers) Deploy(ctx context.Context, t Trigger, revision int64) (*Trigger, error) {
	var out *Trigger
	err := db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		var err error
		out, err = deployTrigger(tx, t, revision)
		return err
	})
	return out, err
}

func deployTrigger(tx *gorm.DB, t Trigger, revision int64) (*Trigger, error) {
	if err := t.TriggerKey.validate(); err != nil {
		return nil, err
	}
	now := db.Now()
	existing, err := getTrigger(tx, t.TriggerKey, true)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		if revision > 0 {
			return nil, fmt.Errorf("trigger %s has no revision %d: %w", t.TriggerKey.Name, revision, ErrTriggerRevision)
		}
		t.ID, t.Revision = 0, 1
		t.DeployedAt, t.UpdatedAt, t.ActiveSince = now, now, now
		t.LastSlot, t.TriggeredAt, t.DeletedAt = nil, nil, nil
		if t.UpdatedBy == "" {
			t.UpdatedBy = t.DeployedBy
		}
		if err := tx.Create(&t).Error; err != nil {
			return nil, fmt.Errorf("deploy trigger %s: %w", t.TriggerKey, db.Translate(err))
		}
		return &t, nil
	case err != nil:
		return nil, err
	}
	if revision > 0 && revision != existing.Revision {
		return nil, fmt.Errorf("trigger %s is at revision %d, not %d: %w", t.TriggerKey.Name, existing.Revision, revision, ErrTriggerRevision)
	}
	if t.sameContent(existing) {
		return existing, nil
	}
	f := map[string]any{
		"task_version": t.TaskVersion, "revision": existing.Revision + 1, "active": t.Active,
		"automation_type": t.AutomationType, "spec": t.Spec, "automation_spec": t.AutomationSpec,
		"description": t.Description, "updated_by": t.DeployedBy, "deleted_at": nil, "deployed_at": now,
	}
	if t.DeployedBy != "" {
		f["deployed_by"] = t.DeployedBy
	}
	reanchor := t.Active && (!existing.Active || existing.DeletedAt != nil || !bytes.Equal(t.AutomationSpec, existing.AutomationSpec))
	if reanchor {
		f["active_since"] = now
	}
	if t.Active != existing.Active || existing.DeletedAt != nil || reanchor {
		f["updated_at"] = now
	}
	res := tx.Model(&Trigger{}).Where("id = ? AND revision = ?", existing.ID, existing.Revision).Updates(f)
	if res.Error != nil {
		return nil, fmt.Errorf("deploy trigger %s: %w", t.TriggerKey, db.Translate(res.Error))
	}
	if res.RowsAffected != 1 {
		return nil, fmt.Errorf("trigger %s changed meanwhile: %w", t.TriggerKey.Name, ErrTriggerRevision)
	}
	return getTrigger(tx, t.TriggerKey, false)
}

// ReplaceForTask makes ts the triggers of their task (every t names the same
// task): each is deployed, and the task's other live triggers are deleted.
// An empty ts changes nothing (a deploy of a task without triggers keeps
// those deployed on their own).
func (r *Triggers) ReplaceForTask(ctx context.Context, ts []Trigger) ([]Trigger, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	task := ts[0].TriggerKey
	out := make([]Trigger, 0, len(ts))
	err := db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		out = out[:0]
		names := make([]string, 0, len(ts))
		for _, t := range ts {
			k := t.TriggerKey
			if k.Org != task.Org || k.Project != task.Project || k.Domain != task.Domain || k.TaskName != task.TaskName {
				return errs.Invalidf("trigger %s belongs to another task than %s", k, task.TaskName)
			}
			got, err := deployTrigger(tx, t, 0)
			if err != nil {
				return err
			}
			out = append(out, *got)
			names = append(names, k.Name)
		}
		now := db.Now()
		res := tx.Model(&Trigger{}).
			Where("org = ? AND project = ? AND domain = ? AND task_name = ? AND deleted_at IS NULL AND name NOT IN ?",
				task.Org, task.Project, task.Domain, task.TaskName, names).
			Updates(map[string]any{"deleted_at": now, "active": false, "updated_at": now, "revision": gorm.Expr("revision + 1")})
		if res.Error != nil {
			return fmt.Errorf("delete the other triggers of %s: %w", task.TaskName, db.Translate(res.Error))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func getTrigger(tx *gorm.DB, k TriggerKey, withDeleted bool) (*Trigger, error) {
	var t Trigger
	q := tx.Where("org = ? AND project = ? AND domain = ? AND task_name = ? AND name = ?", k.Org, k.Project, k.Domain, k.TaskName, k.Name)
	if !withDeleted {
		q = q.Where("deleted_at IS NULL")
	}
	if err := q.Take(&t).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, errs.NotFoundf("trigger %q of task %s not found in project %s, domain %s", k.Name, k.TaskName, k.Project, k.Domain)
		}
		return nil, fmt.Errorf("trigger %s: %w", k, db.Translate(err))
	}
	return &t, nil
}

// Get returns a trigger that is not deleted.
func (r *Triggers) Get(ctx context.Context, k TriggerKey) (*Trigger, error) {
	return getTrigger(r.db.WithContext(ctx), k, false)
}

// GetByID returns a trigger by its id, deleted or not.
func (r *Triggers) GetByID(ctx context.Context, id int64) (*Trigger, error) {
	var t Trigger
	if err := r.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error; err != nil {
		return nil, fmt.Errorf("trigger %d: %w", id, db.Translate(err))
	}
	return &t, nil
}

// SetActive activates or deactivates every trigger of keys, all or none
// (errs.ErrNotFound names the first missing). Only a change bumps the
// revision and updated_at; activating re-anchors the schedule, so an
// activated trigger does not make the firings it missed while inactive.
func (r *Triggers) SetActive(ctx context.Context, keys []TriggerKey, active bool, by string) error {
	return db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		now := db.Now()
		for _, k := range keys {
			t, err := getTrigger(tx, k, false)
			if err != nil {
				return err
			}
			if t.Active == active {
				continue
			}
			f := map[string]any{"active": active, "revision": t.Revision + 1, "updated_at": now, "updated_by": by}
			if active {
				f["active_since"] = now
			}
			if err := tx.Model(&Trigger{}).Where("id = ?", t.ID).Updates(f).Error; err != nil {
				return fmt.Errorf("update trigger %s: %w", k, db.Translate(err))
			}
		}
		return nil
	})
}

// Delete deletes every trigger of keys, all or none (errs.ErrNotFound
// names the first missing). The rows stay, inactive, with deleted_at.
func (r *Triggers) Delete(ctx context.Context, keys []TriggerKey, by string) error {
	return db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		now := db.Now()
		for _, k := range keys {
			t, err := getTrigger(tx, k, false)
			if err != nil {
				return err
			}
			f := map[string]any{"active": false, "deleted_at": now, "revision": t.Revision + 1, "updated_at": now, "updated_by": by}
			if err := tx.Model(&Trigger{}).Where("id = ?", t.ID).Updates(f).Error; err != nil {
				return fmt.Errorf("delete trigger %s: %w", k, db.Translate(err))
			}
		}
		return nil
	})
}

// TriggerFilter narrows ListTriggers. Empty fields do not filter.
type TriggerFilter struct {
	Org, Project, Domain string // scope: Org alone is org-wide
	TaskName             string
	TaskVersion          string
	NameEquals           string
	NameContains         []Substring
	Active               *bool
	AutomationTypes      []string // nil: any
	DeployedBy           []string // nil: anyone
}

// List lists live triggers: active first, then the most recently updated,
// offset-paginated (the order moves when a trigger is toggled, as the
// reference's does).
func (r *Triggers) List(ctx context.Context, f TriggerFilter, p Page) ([]Trigger, string, error) {
	c, err := decodeCursor("triggers", p.Token)
	if err != nil {
		return nil, "", err
	}
	offset := 0
	if c != nil {
		offset = int(c.ID)
	}
	q := r.db.WithContext(ctx).Model(&Trigger{}).Where("deleted_at IS NULL").Where("org = ?", f.Org)
	for col, v := range map[string]string{"project": f.Project, "domain": f.Domain, "task_name": f.TaskName, "task_version": f.TaskVersion} {
		if v != "" {
			q = q.Where(col+" = ?", v)
		}
	}
	if f.NameEquals != "" {
		q = q.Where("name = ?", f.NameEquals)
	}
	for _, s := range f.NameContains {
		q = whereContains(q, "name", s)
	}
	if f.Active != nil {
		q = q.Where("active = ?", *f.Active)
	}
	if f.AutomationTypes != nil {
		q = q.Where("automation_type IN ?", append(f.AutomationTypes, ""))
	}
	if f.DeployedBy != nil {
		q = q.Where("deployed_by IN ?", append(f.DeployedBy, "\x00"))
	}
	limit := p.limit()
	var rows []Trigger
	err = q.Order(clause.OrderBy{Columns: []clause.OrderByColumn{
		{Column: clause.Column{Name: "active"}, Desc: true},
		{Column: clause.Column{Name: "updated_at"}, Desc: true},
		{Column: clause.Column{Name: "id"}, Desc: true},
	}}).Offset(offset).Limit(limit + 1).Find(&rows).Error
	if err != nil {
		return nil, "", fmt.Errorf("list triggers: %w", db.Translate(err))
	}
	if len(rows) <= limit {
		return rows, "", nil
	}
	return rows[:limit], cursor{Query: "triggers", ID: int64(offset + limit)}.encode(), nil
}

// Scheduled lists the triggers the scheduler fires: live, active, with a
// schedule.
func (r *Triggers) Scheduled(ctx context.Context) ([]Trigger, error) {
	var rows []Trigger
	err := r.db.WithContext(ctx).Where("active AND deleted_at IS NULL AND automation_type = ?", TriggerTypeSchedule).
		Order("id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list scheduled triggers: %w", db.Translate(err))
	}
	return rows, nil
}

// RecordRun records that trigger t (at its revision) made run, for the
// scheduled time at (nil: a run by name), and moves the trigger's
// triggered_at and, for a scheduled run, its last slot forward (never
// back). Recording the same run again changes nothing but those times.
func (r *Triggers) RecordRun(ctx context.Context, t *Trigger, run RunKey, at *time.Time) error {
	return db.WithTx(ctx, r.db, func(tx *gorm.DB) error {
		now := db.Now()
		row := TriggerRun{RunKey: run, TriggerID: t.ID, Revision: t.Revision, ScheduledAt: at, CreatedAt: now}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
			return fmt.Errorf("record the run of trigger %s: %w", t.TriggerKey, db.Translate(err))
		}
		when := now
		if at != nil {
			when = at.UTC()
			if err := tx.Model(&Trigger{}).Where("id = ? AND (last_slot IS NULL OR last_slot < ?)", t.ID, when).
				Update("last_slot", when).Error; err != nil {
				return fmt.Errorf("advance trigger %s: %w", t.TriggerKey, db.Translate(err))
			}
		}
		if err := tx.Model(&Trigger{}).Where("id = ? AND (triggered_at IS NULL OR triggered_at < ?)", t.ID, when).
			Update("triggered_at", when).Error; err != nil {
			return fmt.Errorf("advance trigger %s: %w", t.TriggerKey, db.Translate(err))
		}
		return nil
	})
}

// SkipSlot moves a trigger's last slot to at (never back) without a run:
// a firing that was refused for good.
func (r *Triggers) SkipSlot(ctx context.Context, id int64, at time.Time) error {
	err := r.db.WithContext(ctx).Model(&Trigger{}).Where("id = ? AND (last_slot IS NULL OR last_slot < ?)", id, at.UTC()).
		Update("last_slot", at.UTC()).Error
	if err != nil {
		return fmt.Errorf("skip a firing of trigger %d: %w", id, db.Translate(err))
	}
	return nil
}

// RunsOf lists the runs a trigger made, newest first, at most limit.
func (r *Triggers) RunsOf(ctx context.Context, triggerID int64, limit int) ([]TriggerRun, error) {
	var rows []TriggerRun
	err := r.db.WithContext(ctx).Where("trigger_id = ?", triggerID).Order("created_at DESC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("runs of trigger %d: %w", triggerID, db.Translate(err))
	}
	return rows, nil
}

// RunTrigger is the trigger that made a run, as its views show it.
type RunTrigger struct {
	Trigger        TriggerKey
	Revision       int64
	ScheduledAt    *time.Time
	AutomationSpec []byte
}

// RunTriggers returns, for those of runs a trigger made, which trigger.
func (r *Triggers) RunTriggers(ctx context.Context, runs []RunKey) (map[RunKey]RunTrigger, error) {
	out := map[RunKey]RunTrigger{}
	if len(runs) == 0 {
		return out, nil
	}
	// By the primary key: one query per project and domain (a page of
	// runs has one).
	type scope struct{ org, project, domain string }
	groups := map[scope][]string{}
	want := make(map[RunKey]bool, len(runs))
	for _, k := range runs {
		sc := scope{k.Org, k.Project, k.Domain}
		groups[sc] = append(groups[sc], k.RunName)
		want[k] = true
	}
	var rows []struct {
		Org, Project, Domain, RunName string
		Revision                      int64
		ScheduledAt                   *time.Time
		TaskName, Name                string
		AutomationSpec                []byte
	}
	for sc, names := range groups {
		err := r.db.WithContext(ctx).Table("trigger_runs AS tr").
			Select("tr.org, tr.project, tr.domain, tr.run_name, tr.revision, tr.scheduled_at, tg.task_name, tg.name, tg.automation_spec").
			Joins("JOIN triggers tg ON tg.id = tr.trigger_id").
			Where("tr.org = ? AND tr.project = ? AND tr.domain = ? AND tr.run_name IN ?", sc.org, sc.project, sc.domain, names).
			Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("the triggers of runs: %w", db.Translate(err))
		}
		for _, row := range rows {
			k := RunKey{Org: row.Org, Project: row.Project, Domain: row.Domain, RunName: row.RunName}
			if !want[k] {
				continue
			}
			out[k] = RunTrigger{
				Trigger:  TriggerKey{Org: row.Org, Project: row.Project, Domain: row.Domain, TaskName: row.TaskName, Name: row.Name},
				Revision: row.Revision, ScheduledAt: row.ScheduledAt, AutomationSpec: row.AutomationSpec,
			}
		}
		rows = rows[:0]
	}
	return out, nil
}

// whereMadeBy narrows a query of run roots to those the trigger named name
// of the run's task made.
func whereMadeBy(q *gorm.DB, name string) *gorm.DB {
	return q.Where("EXISTS (SELECT 1 FROM trigger_runs tr JOIN triggers tg ON tg.id = tr.trigger_id "+
		"WHERE tr.org = actions.org AND tr.project = actions.project AND tr.domain = actions.domain AND "+
		"tr.run_name = actions.run_name AND tg.task_name = actions.task_name AND tg.name = ?)", name)
}

// whereTriggerTypes narrows a query of task versions to those with a live
// trigger of one of types; TYPE_NONE among them also keeps versions with
// no live trigger at all.
func whereTriggerTypes(q *gorm.DB, types []string) *gorm.DB {
	const live = "SELECT 1 FROM triggers tg WHERE tg.org = tasks.org AND tg.project = tasks.project AND " +
		"tg.domain = tasks.domain AND tg.task_name = tasks.name AND tg.task_version = tasks.version AND tg.deleted_at IS NULL"
	if slices.Contains(types, TriggerTypeNone) {
		return q.Where("(EXISTS ("+live+" AND tg.automation_type IN ?) OR NOT EXISTS ("+live+"))", types)
	}
	return q.Where("EXISTS ("+live+" AND tg.automation_type IN ?)", append(types, ""))
}
