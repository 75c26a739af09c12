package trigger

import (
	"context"
	"fmt"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/schedule"
	"fmgr.dev/internal/store"
)

// CheckTaskTriggers validates the triggers a DeployTask carries before
// anything is written: names unique and valid, automations the scheduler
// can run.
func (s *Service) CheckTaskTriggers(id store.TaskID, ts []*task.TaskTrigger) error {
	seen := map[string]bool{}
	for i, t := range ts {
		field := fmt.Sprintf("triggers[%d]", i)
		k, err := ident.Trigger(field, &common.TriggerName{Org: id.Org, Project: id.Project, Domain: id.Domain, TaskName: id.Name, Name: t.GetName()})
		if err != nil {
			return err
		}
		if seen[k.Name] {
			return errs.Invalidf("%s.name: task %s declares trigger %q twice", field, id.Name, k.Name)
		}
		seen[k.Name] = true
		if t.GetSpec() == nil {
			return errs.Invalidf("%s.spec is required", field)
		}
		if _, err := schedule.Parse(field+".automation_spec", t.GetAutomationSpec(), s.minute); err != nil {
			return err
		}
		if _, err := row(k, fromTaskTrigger(id.Version, t), t.GetAutomationSpec(), ""); err != nil {
			return err
		}
	}
	return nil
}

// DeployTaskTriggers makes ts the triggers of the task version id (already
// deployed): each is pinned to that version, and the task's other
// triggers are deleted. No triggers leaves those deployed earlier alone.
func (s *Service) DeployTaskTriggers(ctx context.Context, id store.TaskID, ts []*task.TaskTrigger) error {
	if err := s.CheckTaskTriggers(id, ts); err != nil {
		return err
	}
	rows := make([]store.Trigger, 0, len(ts))
	for _, t := range ts {
		k := store.TriggerKey{Org: id.Org, Project: id.Project, Domain: id.Domain, TaskName: id.Name, Name: t.GetName()}
		r, err := row(k, fromTaskTrigger(id.Version, t), t.GetAutomationSpec(), deployedBy(ctx))
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	got, err := s.st.Triggers.ReplaceForTask(ctx, rows)
	if err != nil {
		return err
	}
	for _, t := range got {
		s.log.InfoContext(ctx, "trigger deployed with its task", "trigger", t.TriggerKey.String(), "version", t.TaskVersion,
			"revision", t.Revision, "active", t.Active, "type", t.AutomationType)
	}
	return nil
}
