// Package trigger serves flyteidl2.trigger.TriggerService, stores the
// triggers TaskService.DeployTask carries, and runs the scheduler that
// fires the scheduled ones. It imports no other service: the composition
// hands TaskService this package's TaskTriggers, and hands the scheduler a
// RunCreator (the run state) to make runs through.
package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/trigger"
	"fmgr.dev/gen/go/flyteidl2/trigger/triggerconnect"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/listreq"
	"fmgr.dev/internal/schedule"
	"fmgr.dev/internal/store"
)

// Service implements TriggerService over the store.
type Service struct {
	st     *store.Store
	minute time.Duration
	log    *slog.Logger
}

var _ triggerconnect.TriggerServiceHandler = (*Service)(nil)

// NewService returns the service. minute is how long a FixedRate minute
// lasts (a minute; tests shorten it); it only matters to validation here.
func NewService(st *store.Store, minute time.Duration, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	if minute <= 0 {
		minute = time.Minute
	}
	return &Service{st: st, minute: minute, log: log}
}

// Handler returns the service's Connect handler and the path to mount it on.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return triggerconnect.NewTriggerServiceHandler(s, opts...)
}

// deployedBy is the subject deploying: unknown without authentication.
func deployedBy(ctx context.Context) string { return authn.Subject(ctx) }

// checkTask requires the task version a trigger pins to be deployed, and
// the input a schedule puts its time in (kickoff) to be one of its inputs.
func (s *Service) checkTask(ctx context.Context, k store.TriggerKey, version, field, kickoff string) error {
	if version == "" {
		return errs.Invalidf("%s is required: a trigger runs one deployed version of its task", field)
	}
	id := store.TaskID{Org: k.Org, Project: k.Project, Domain: k.Domain, Name: k.TaskName, Version: version}
	t, err := s.st.Tasks.Get(ctx, id)
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return errs.NotFoundf("task %s version %s is not deployed in project %s, domain %s: deploy it before its trigger",
				k.TaskName, version, k.Project, k.Domain)
		}
		return err
	}
	if kickoff == "" {
		return nil
	}
	raw, err := s.st.Tasks.GetSpec(ctx, t.SpecDigest)
	if err != nil {
		return err
	}
	spec := &task.TaskSpec{}
	if err := proto.Unmarshal(raw, spec); err != nil {
		return fmt.Errorf("decode the spec of task %s: %w", id, err)
	}
	var names []string
	for _, v := range spec.GetTaskTemplate().GetInterface().GetInputs().GetVariables() {
		if v.GetKey() == kickoff {
			return nil
		}
		names = append(names, v.GetKey())
	}
	return errs.Invalidf("automation_spec.schedule.kickoff_time_input_arg %q is not an input of task %s (its inputs: %s)",
		kickoff, k.TaskName, strings.Join(names, ", "))
}

// DeployTrigger creates or replaces one trigger. A revision names the one
// the caller read: if the trigger moved since, the deploy fails with
// FAILED_PRECONDITION "optimistic lock failure", which the official UI
// answers by reading it again and retrying.
func (s *Service) DeployTrigger(ctx context.Context, req *connect.Request[trigger.DeployTriggerRequest]) (*connect.Response[trigger.DeployTriggerResponse], error) {
	msg := req.Msg
	k, err := ident.Trigger("name", msg.GetName())
	if err != nil {
		return nil, err
	}
	spec := msg.GetSpec()
	if spec == nil {
		return nil, errs.Invalidf("spec is required")
	}
	if _, err := schedule.Parse("automation_spec", msg.GetAutomationSpec(), s.minute); err != nil {
		return nil, err
	}
	kickoff := msg.GetAutomationSpec().GetSchedule().GetKickoffTimeInputArg()
	if err := s.checkTask(ctx, k, spec.GetTaskVersion(), "spec.task_version", kickoff); err != nil {
		return nil, err
	}
	r, err := row(k, spec, msg.GetAutomationSpec(), deployedBy(ctx))
	if err != nil {
		return nil, err
	}
	t, err := s.st.Triggers.Deploy(ctx, r, int64(msg.GetRevision()))
	if err != nil {
		return nil, err
	}
	d, err := decode(t)
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "trigger deployed", "trigger", k.String(), "revision", t.Revision, "active", t.Active, "type", t.AutomationType)
	return connect.NewResponse(&trigger.DeployTriggerResponse{Trigger: d.details()}), nil
}

// GetTriggerDetails returns one live trigger with its spec.
func (s *Service) GetTriggerDetails(ctx context.Context, req *connect.Request[trigger.GetTriggerDetailsRequest]) (*connect.Response[trigger.GetTriggerDetailsResponse], error) {
	k, err := ident.Trigger("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	t, err := s.st.Triggers.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	d, err := decode(t)
	if err != nil {
		return nil, err
	}
	resp := connect.NewResponse(&trigger.GetTriggerDetailsResponse{Trigger: d.details()})
	resp.Header().Set(NextFiringHeader, s.nextFiring(d))
	return resp, nil
}

// GetTriggerRevisionDetails answers for the trigger's current revision;
// earlier revisions are not kept.
func (s *Service) GetTriggerRevisionDetails(ctx context.Context, req *connect.Request[trigger.GetTriggerRevisionDetailsRequest]) (*connect.Response[trigger.GetTriggerRevisionDetailsResponse], error) {
	id := req.Msg.GetId()
	k, err := ident.Trigger("id.name", id.GetName())
	if err != nil {
		return nil, err
	}
	t, err := s.st.Triggers.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	if uint64(t.Revision) != id.GetRevision() {
		return nil, errs.NotFoundf("trigger %q is at revision %d; earlier revisions are not kept", k.Name, t.Revision)
	}
	d, err := decode(t)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&trigger.GetTriggerRevisionDetailsResponse{Trigger: d.details()}), nil
}

// GetTriggerRevisionHistory lists what is kept: the current revision.
func (s *Service) GetTriggerRevisionHistory(ctx context.Context, req *connect.Request[trigger.GetTriggerRevisionHistoryRequest]) (*connect.Response[trigger.GetTriggerRevisionHistoryResponse], error) {
	k, err := ident.Trigger("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	t, err := s.st.Triggers.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	d, err := decode(t)
	if err != nil {
		return nil, err
	}
	action := trigger.TriggerRevisionAction_TRIGGER_REVISION_ACTION_DEPLOY
	if !t.DeployedAt.Equal(t.UpdatedAt) && t.UpdatedAt.After(t.DeployedAt) {
		action = trigger.TriggerRevisionAction_TRIGGER_REVISION_ACTION_DEACTIVATE
		if t.Active {
			action = trigger.TriggerRevisionAction_TRIGGER_REVISION_ACTION_ACTIVATE
		}
	}
	rev := &trigger.TriggerRevision{Id: d.id(), Metadata: d.metadata(), Status: d.status(), Action: action, CreatedAt: d.status().GetUpdatedAt()}
	return connect.NewResponse(&trigger.GetTriggerRevisionHistoryResponse{Triggers: []*trigger.TriggerRevision{rev}}), nil
}

// ListTriggers lists live triggers of an org, a project, a task or a task
// version, active first, then the most recently updated.
func (s *Service) ListTriggers(ctx context.Context, req *connect.Request[trigger.ListTriggersRequest]) (*connect.Response[trigger.ListTriggersResponse], error) {
	msg := req.Msg
	f, page, none, err := listreq.ParseTriggers(msg.GetRequest())
	if err != nil {
		return nil, err
	}
	switch scope := msg.GetScopeBy().(type) {
	case *trigger.ListTriggersRequest_Org:
		f.Org = ident.Org(scope.Org)
	case *trigger.ListTriggersRequest_ProjectId:
		if f.Org, f.Project, f.Domain, err = ident.Project("project_id", scope.ProjectId); err != nil {
			return nil, err
		}
	case *trigger.ListTriggersRequest_TaskId:
		id, err := ident.Task("task_id", scope.TaskId)
		if err != nil {
			return nil, err
		}
		if (f.TaskName != "" && f.TaskName != id.Name) || (f.TaskVersion != "" && f.TaskVersion != id.Version) {
			none = true
		}
		f.Org, f.Project, f.Domain, f.TaskName, f.TaskVersion = id.Org, id.Project, id.Domain, id.Name, id.Version
	case *trigger.ListTriggersRequest_TaskName:
		// ident validates whole task ids; a fixed version stands in.
		n := scope.TaskName
		id, err := ident.Task("task_name", &task.TaskIdentifier{Org: n.GetOrg(), Project: n.GetProject(), Domain: n.GetDomain(), Name: n.GetName(), Version: "v"})
		if err != nil {
			return nil, err
		}
		if f.TaskName != "" && f.TaskName != id.Name {
			none = true
		}
		f.Org, f.Project, f.Domain, f.TaskName = id.Org, id.Project, id.Domain, id.Name
	case nil:
		return nil, errs.Invalidf("a scope (org, project_id, task_id or task_name) is required")
	}
	out := &trigger.ListTriggersResponse{Triggers: []*trigger.Trigger{}}
	if none {
		return connect.NewResponse(out), nil
	}
	rows, next, err := s.st.Triggers.List(ctx, f, page)
	if err != nil {
		return nil, err
	}
	out.Token = next
	firings := make([]string, 0, len(rows))
	for i := range rows {
		d, err := decode(&rows[i])
		if err != nil {
			return nil, err
		}
		out.Triggers = append(out.Triggers, d.summary())
		firings = append(firings, s.nextFiring(d))
	}
	resp := connect.NewResponse(out)
	if len(firings) > 0 {
		resp.Header().Set(NextFiringHeader, strings.Join(firings, ","))
	}
	return resp, nil
}

// NextFiringHeader carries when triggers fire next, which the IDL has no
// field for: on GetTriggerDetails the trigger's, on ListTriggers one per
// trigger listed, in the response's order, separated by commas. Each is
// an RFC 3339 time in UTC, or "-" for a trigger that is not scheduled
// (inactive, or run by name only). The console shows it; other clients
// can ignore it.
const NextFiringHeader = "Fm-Trigger-Next-Firing"

// nextFiring is the header value of one trigger: the firing the scheduler
// makes next (internal/schedule computes it from the trigger's activation
// and last firing, as the scheduler does).
func (s *Service) nextFiring(d *decoded) string {
	if !d.row.Active {
		return "-"
	}
	sched, err := schedule.Parse("automation_spec", d.automation, s.minute)
	if err != nil || sched == nil {
		return "-"
	}
	var last time.Time
	if d.row.LastSlot != nil {
		last = *d.row.LastSlot
	}
	next := schedule.Upcoming(sched, d.row.ActiveSince, last)
	if next.IsZero() {
		return "-"
	}
	return next.UTC().Format(time.RFC3339Nano)
}

func keys(field string, names []*common.TriggerName) ([]store.TriggerKey, error) {
	if len(names) == 0 {
		return nil, errs.Invalidf("%s: name at least one trigger", field)
	}
	out := make([]store.TriggerKey, 0, len(names))
	for i, n := range names {
		k, err := ident.Trigger(fmt.Sprintf("%s[%d]", field, i), n)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// UpdateTriggers activates or deactivates triggers, all or none. A
// deactivated trigger fires no more from the scheduler's next pass on; an
// activated one counts its schedule from now, without the firings it
// missed.
func (s *Service) UpdateTriggers(ctx context.Context, req *connect.Request[trigger.UpdateTriggersRequest]) (*connect.Response[trigger.UpdateTriggersResponse], error) {
	ks, err := keys("names", req.Msg.GetNames())
	if err != nil {
		return nil, err
	}
	if err := s.st.Triggers.SetActive(ctx, ks, req.Msg.GetActive(), deployedBy(ctx)); err != nil {
		return nil, err
	}
	for _, k := range ks {
		s.log.InfoContext(ctx, "trigger updated", "trigger", k.String(), "active", req.Msg.GetActive())
	}
	return connect.NewResponse(&trigger.UpdateTriggersResponse{}), nil
}

// DeleteTriggers deletes triggers, all or none.
func (s *Service) DeleteTriggers(ctx context.Context, req *connect.Request[trigger.DeleteTriggersRequest]) (*connect.Response[trigger.DeleteTriggersResponse], error) {
	ks, err := keys("names", req.Msg.GetNames())
	if err != nil {
		return nil, err
	}
	if err := s.st.Triggers.Delete(ctx, ks, deployedBy(ctx)); err != nil {
		return nil, err
	}
	for _, k := range ks {
		s.log.InfoContext(ctx, "trigger deleted", "trigger", k.String())
	}
	return connect.NewResponse(&trigger.DeleteTriggersResponse{}), nil
}
