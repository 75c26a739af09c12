package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/task/taskconnect"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/listreq"
	"fmgr.dev/internal/store"
)

// TaskService implements flyteidl2.task.TaskService over the store: task
// versions are immutable, their specs stored once by content digest.
type TaskService struct {
	st       *store.Store
	bundles  BundleChecker
	triggers TaskTriggers // nil: triggers are refused
	projects config.Projects
	log      *slog.Logger
}

// BundleChecker refuses a spec whose code bundle this manager's storage
// lost (runstate.Service.CheckCodeBundle): what and again phrase its
// message.
type BundleChecker interface {
	CheckCodeBundle(ctx context.Context, spec *task.TaskSpec, what, again string) error
}

var _ taskconnect.TaskServiceHandler = (*TaskService)(nil)

// NewTaskService returns the TaskService. cfg.AutoCreate decides whether
// deploying into an unknown project creates it.
func NewTaskService(st *store.Store, bundles BundleChecker, cfg config.Projects, log *slog.Logger) *TaskService {
	if log == nil {
		log = slog.Default()
	}
	return &TaskService{st: st, bundles: bundles, projects: cfg, log: log}
}

// Handler returns the service's Connect handler and the path to mount it on.
func (s *TaskService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return taskconnect.NewTaskServiceHandler(s, opts...)
}

// specBytes is the canonical encoding of a spec, the input of its digest.
func specBytes(spec *task.TaskSpec) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(spec)
}

// DeployTask records one task version. Deploying the same version with the
// same spec again succeeds without a change; with a different spec it fails
// with AlreadyExists (which the SDK reports as "already exists, skipping").
func (s *TaskService) DeployTask(ctx context.Context, req *connect.Request[task.DeployTaskRequest]) (*connect.Response[task.DeployTaskResponse], error) {
	msg := req.Msg
	id, err := ident.Task("task_id", msg.GetTaskId())
	if err != nil {
		return nil, err
	}
	if err := checkSpec(id, msg.GetSpec()); err != nil {
		return nil, err
	}
	if images.Reserved(id.Org, id.Project, id.Domain, id.Name) {
		return nil, errs.Invalidf("task %s in project %s, domain %s is the manager's built-in image builder: deploy under another name",
			id.Name, id.Project, id.Domain)
	}
	// The SDK sends triggers only for tasks that declare some. They are
	// checked before anything is written, and refused where no trigger
	// service is wired.
	if n := len(msg.GetTriggers()); n > 0 {
		if s.triggers == nil {
			names := make([]string, 0, n)
			for _, t := range msg.GetTriggers() {
				names = append(names, fmt.Sprintf("%q", t.GetName()))
			}
			return nil, errs.Invalidf("triggers are not supported here: task %s declares %s; deploy it without triggers",
				id.Name, strings.Join(names, ", "))
		}
		if err := s.triggers.CheckTaskTriggers(id, msg.GetTriggers()); err != nil {
			return nil, err
		}
	}
	// The SDK's client cache hands out a bundle's location without
	// uploading it again: a version whose code is gone would be recorded,
	// and fail every run.
	if err := s.bundles.CheckCodeBundle(ctx, msg.GetSpec(), fmt.Sprintf("task %s version %s", id.Name, id.Version), "deploy again"); err != nil {
		return nil, err
	}
	_, newProject, err := s.st.Projects.AdmitWork(ctx, id.Org, id.Project, "task_id.domain", id.Domain, s.projects.AutoCreate)
	if err != nil {
		return nil, err
	}
	if newProject {
		s.log.InfoContext(ctx, "project created on first use", "org", id.Org, "project", id.Project)
	}

	spec := msg.GetSpec()
	b, err := specBytes(spec)
	if err != nil {
		return nil, fmt.Errorf("encode task spec: %w", err)
	}
	row := store.Task{
		TaskID:          id,
		SpecDigest:      store.SpecDigest(b),
		ShortName:       spec.GetShortName(),
		EnvironmentName: spec.GetEnvironment().GetName(),
		DeployedBy:      deployedBy(ctx),
	}
	_, created, err := s.st.Tasks.Deploy(ctx, row, b)
	switch {
	case errors.Is(err, errs.ErrAlreadyExists):
		return nil, fmt.Errorf("task %s version %s is already deployed in project %s, domain %s with a different spec; "+
			"versions are immutable, deploy the change under a new version: %w",
			id.Name, id.Version, id.Project, id.Domain, errs.ErrAlreadyExists)
	case err != nil:
		return nil, err
	}
	if len(msg.GetTriggers()) > 0 {
		if err := s.triggers.DeployTaskTriggers(ctx, id, msg.GetTriggers()); err != nil {
			return nil, err
		}
	}
	if created {
		s.log.InfoContext(ctx, "task deployed", "org", id.Org, "project", id.Project, "domain", id.Domain,
			"task", id.Name, "version", id.Version, "digest", row.SpecDigest)
	}
	return connect.NewResponse(&task.DeployTaskResponse{}), nil
}

// checkSpec requires a task template and, where the template names
// itself, that it names the same task as task_id (the SDK copies task_id
// from the template, so they always agree). The spec is stored as sent.
func checkSpec(id store.TaskID, spec *task.TaskSpec) error {
	if spec == nil {
		return errs.Invalidf("spec is required")
	}
	tmpl := spec.GetTaskTemplate()
	if tmpl == nil {
		return errs.Invalidf("spec.task_template is required")
	}
	tid := tmpl.GetId()
	for _, p := range []struct{ field, got, want string }{
		{"org", tid.GetOrg(), id.Org},
		{"project", tid.GetProject(), id.Project},
		{"domain", tid.GetDomain(), id.Domain},
		{"name", tid.GetName(), id.Name},
		{"version", tid.GetVersion(), id.Version},
	} {
		if p.got != "" && p.got != p.want {
			return errs.Invalidf("spec.task_template.id.%s %q does not match task_id.%s %q", p.field, p.got, p.field, p.want)
		}
	}
	return nil
}

// deployedBy is the subject deploying. Without authentication it is not
// known and stays empty.
func deployedBy(ctx context.Context) string { return authn.Subject(ctx) }

// GetTaskDetails returns one task version with its spec.
func (s *TaskService) GetTaskDetails(ctx context.Context, req *connect.Request[task.GetTaskDetailsRequest]) (*connect.Response[task.GetTaskDetailsResponse], error) {
	id, err := ident.Task("task_id", req.Msg.GetTaskId())
	if err != nil {
		return nil, err
	}
	row, err := s.st.Tasks.Get(ctx, id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("task %s version %s not found in project %s, domain %s", id.Name, id.Version, id.Project, id.Domain)
	}
	if err != nil {
		return nil, err
	}
	spec, err := s.spec(ctx, row.SpecDigest)
	if err != nil {
		return nil, err
	}
	md := taskMetadata(row)
	md.ShortDescription = spec.GetDocumentation().GetShortDescription()
	return connect.NewResponse(&task.GetTaskDetailsResponse{Details: &task.TaskDetails{
		TaskId:   ident.TaskProto(row.TaskID),
		Metadata: md,
		Spec:     spec,
	}}), nil
}

func (s *TaskService) spec(ctx context.Context, digest string) (*task.TaskSpec, error) {
	b, err := s.st.Tasks.GetSpec(ctx, digest)
	if err != nil {
		return nil, err
	}
	spec := &task.TaskSpec{}
	if err := proto.Unmarshal(b, spec); err != nil {
		return nil, fmt.Errorf("decode task spec %s: %w", digest, err)
	}
	return spec, nil
}

func taskMetadata(t *store.Task) *task.TaskMetadata {
	md := &task.TaskMetadata{
		ShortName:       t.ShortName,
		DeployedAt:      timestamppb.New(t.CreatedAt),
		EnvironmentName: t.EnvironmentName,
	}
	if t.DeployedBy != "" {
		md.DeployedBy = identity(t.DeployedBy)
	}
	return md
}

// identity is the wire form of a user known only by subject.
func identity(subject string) *common.EnrichedIdentity {
	return &common.EnrichedIdentity{Principal: &common.EnrichedIdentity_User{User: &common.User{
		Id: &common.UserIdentifier{Subject: subject},
	}}}
}

// ListTasks lists task versions, newest first, scoped to an org or a
// project/domain. Filters the store cannot apply (name CONTAINS and
// is_entrypoint) are checked on each page the store returns, so a page may
// hold fewer tasks than the limit; its token still continues the listing.
func (s *TaskService) ListTasks(ctx context.Context, req *connect.Request[task.ListTasksRequest]) (*connect.Response[task.ListTasksResponse], error) {
	msg := req.Msg
	q, err := listreq.ParseTasks(msg.GetRequest())
	if err != nil {
		return nil, err
	}
	switch scope := msg.GetScopeBy().(type) {
	case *task.ListTasksRequest_ProjectId:
		q.Filter.Org, q.Filter.Project, q.Filter.Domain, err = ident.Project("project_id", scope.ProjectId)
		if err != nil {
			return nil, err
		}
	case *task.ListTasksRequest_Org:
		q.Filter.Org = scope.Org
	}
	entrypoint, err := knownFilters(msg.GetKnownFilters(), &q)
	if err != nil {
		return nil, err
	}
	out := &task.ListTasksResponse{Tasks: []*task.Task{}}
	if q.MatchNone {
		return connect.NewResponse(out), nil
	}
	// Until the store orders tasks oldest first, q.Ascending is served
	// newest first like every other task listing.
	rows, next, err := s.st.Tasks.List(ctx, q.Filter, q.Page)
	if err != nil {
		return nil, err
	}
	out.Token = next
	specs, err := s.specsOf(ctx, rows)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		row := &rows[i]
		spec := specs[row.SpecDigest]
		if !entrypoint(spec) {
			continue
		}
		latest, err := s.latestRun(ctx, row.TaskID)
		if err != nil {
			return nil, err
		}
		md := taskMetadata(row)
		md.ShortDescription = spec.GetDocumentation().GetShortDescription()
		t := &task.Task{TaskId: ident.TaskProto(row.TaskID), Metadata: md}
		if latest != nil {
			t.TaskSummary = &task.TaskSummary{LatestRun: latest}
		}
		out.Tasks = append(out.Tasks, t)
	}
	return connect.NewResponse(out), nil
}

// specsOf decodes the specs of a page of task versions in one query, by
// digest (versions deployed from the same code share one).
func (s *TaskService) specsOf(ctx context.Context, rows []store.Task) (map[string]*task.TaskSpec, error) {
	digests := make([]string, 0, len(rows))
	for i := range rows {
		if !slices.Contains(digests, rows[i].SpecDigest) {
			digests = append(digests, rows[i].SpecDigest)
		}
	}
	raw, err := s.st.Tasks.GetSpecs(ctx, digests)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*task.TaskSpec, len(raw))
	for digest, b := range raw {
		spec := &task.TaskSpec{}
		if err := proto.Unmarshal(b, spec); err != nil {
			return nil, fmt.Errorf("decode task spec %s: %w", digest, err)
		}
		out[digest] = spec
	}
	return out, nil
}

// knownFilters applies ListTasksRequest.known_filters: deployed_by (the
// subject) narrows q's store filter like a deployed_by EQUAL filter;
// is_entrypoint (TaskTemplate metadata) is returned as a predicate on
// each version's spec.
func knownFilters(kfs []*task.ListTasksRequest_KnownFilter, q *listreq.TaskQuery) (func(*task.TaskSpec) bool, error) {
	var entrypoint []bool
	for i, kf := range kfs {
		switch f := kf.GetFilterBy().(type) {
		case *task.ListTasksRequest_KnownFilter_DeployedBy:
			switch {
			case len(q.Filter.DeployedBy) == 0:
				q.Filter.DeployedBy = []string{f.DeployedBy}
			case slices.Contains(q.Filter.DeployedBy, f.DeployedBy):
				q.Filter.DeployedBy = []string{f.DeployedBy}
			default:
				q.MatchNone = true
			}
		case *task.ListTasksRequest_KnownFilter_IsEntrypoint:
			entrypoint = append(entrypoint, f.IsEntrypoint)
		default:
			return nil, errs.Invalidf("known_filters[%d] sets no filter", i)
		}
	}
	return func(spec *task.TaskSpec) bool {
		is := spec.GetTaskTemplate().GetMetadata().GetIsEntrypoint()
		return !slices.Contains(entrypoint, !is)
	}, nil
}

// latestRun summarizes the newest run of a task version, nil if none.
func (s *TaskService) latestRun(ctx context.Context, id store.TaskID) (*task.LatestRunSummary, error) {
	runs, _, err := s.st.Actions.ListRuns(ctx, store.RunFilter{
		Org: id.Org, Project: id.Project, Domain: id.Domain, TaskName: id.Name, TaskVersion: id.Version,
	}, store.Page{Limit: 1})
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	r := &runs[0]
	return &task.LatestRunSummary{
		RunId:        ident.RunProto(r.RunKey),
		RunTime:      timestamppb.New(r.CreatedAt),
		Phase:        r.Phase.Proto(),
		RootTaskName: r.Task.Name,
	}, nil
}

// ListVersions lists the versions of one task name, newest first.
func (s *TaskService) ListVersions(ctx context.Context, req *connect.Request[task.ListVersionsRequest]) (*connect.Response[task.ListVersionsResponse], error) {
	msg := req.Msg
	q, err := listreq.ParseVersions(msg.GetRequest())
	if err != nil {
		return nil, err
	}
	name := msg.GetTaskName()
	if name == nil {
		return nil, errs.Invalidf("task_name is required")
	}
	// ident validates whole task ids; a fixed version stands in for the
	// one a TaskName does not have, so errors name task_name's own fields.
	id, err := ident.Task("task_name", &task.TaskIdentifier{
		Org: name.GetOrg(), Project: name.GetProject(), Domain: name.GetDomain(), Name: name.GetName(), Version: "v",
	})
	if err != nil {
		return nil, err
	}
	q.Filter = store.TaskFilter{Org: id.Org, Project: id.Project, Domain: id.Domain, Name: id.Name}
	rows, next, err := s.st.Tasks.List(ctx, q.Filter, q.Page)
	if err != nil {
		return nil, err
	}
	out := &task.ListVersionsResponse{Token: next, Versions: make([]*task.ListVersionsResponse_VersionResponse, 0, len(rows))}
	for i := range rows {
		row := &rows[i]
		v := &task.ListVersionsResponse_VersionResponse{
			Version:    row.TaskID.Version,
			DeployedAt: timestamppb.New(row.CreatedAt),
		}
		if row.DeployedBy != "" {
			v.DeployedBy = identity(row.DeployedBy)
		}
		if v.LatestRun, err = s.latestRun(ctx, row.TaskID); err != nil {
			return nil, err
		}
		out.Versions = append(out.Versions, v)
	}
	return connect.NewResponse(out), nil
}
