package runstate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/failpoint"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

func runBaseKey(run store.RunKey) string {
	return runlayout.RunBaseKey(run.Org, run.Project, run.Domain, run.RunName)
}

// resolvedTask is the task a new action runs.
type resolvedTask struct {
	id     store.TaskID
	spec   *task.TaskSpec
	raw    []byte
	digest string
}

// resolveTask takes an inline spec or looks a deployed task up. idField and
// specField name the two request fields in error messages (they differ:
// CreateRun's task_id/task_spec, a TaskAction's id/spec).
func (s *Service) resolveTask(ctx context.Context, id *task.TaskIdentifier, spec *task.TaskSpec, idField, specField string) (*resolvedTask, error) {
	switch {
	case spec != nil:
		return specTask(spec, specField)
	case id != nil:
		tid, err := ident.Task(idField, id)
		if err != nil {
			return nil, err
		}
		t, err := s.store.Tasks.Get(ctx, tid)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", tid, err)
		}
		sp, err := s.spec(ctx, t.SpecDigest)
		if err != nil {
			return nil, err
		}
		return &resolvedTask{id: tid, spec: sp, digest: t.SpecDigest}, nil
	}
	return nil, errs.Invalidf("%s or %s is required", specField, idField)
}

func specTask(spec *task.TaskSpec, field string) (*resolvedTask, error) {
	tmpl := spec.GetTaskTemplate()
	if tmpl == nil {
		return nil, errs.Invalidf("%s.task_template is required", field)
	}
	if tmpl.GetContainer() == nil {
		return nil, errs.Invalidf("%s.task_template has no container: only container tasks can run here", field)
	}
	raw, err := marshal(spec)
	if err != nil {
		return nil, errs.Invalidf("%s cannot be serialized: %v", field, err)
	}
	id := tmpl.GetId()
	return &resolvedTask{
		id:     store.TaskID{Org: ident.Org(id.GetOrg()), Project: id.GetProject(), Domain: id.GetDomain(), Name: id.GetName(), Version: id.GetVersion()},
		spec:   spec,
		raw:    raw,
		digest: store.SpecDigest(raw),
	}, nil
}

func (t *resolvedTask) newAction(key store.ActionKey) store.NewAction {
	return store.NewAction{
		Key:             key,
		ActionType:      store.ActionTypeTask,
		Task:            t.id,
		TaskType:        t.spec.GetTaskTemplate().GetType(),
		ShortName:       shortName(t.spec, t.id.Name),
		EnvironmentName: t.spec.GetEnvironment().GetName(),
		SpecDigest:      t.digest,
		Spec:            t.raw,
	}
}

func shortName(spec *task.TaskSpec, name string) string {
	if spec.GetShortName() != "" {
		return spec.GetShortName()
	}
	if i := strings.LastIndex(name, "."); i >= 0 {
		return name[i+1:]
	}
	return name
}

// newRunName is 'r' plus 19 random base-36 characters: unique, ≤ 30, and a
// valid DNS label like the reference backend's names.
func newRunName() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	b[0] = 'r'
	for i := 1; i < len(b); i++ {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// CreateRun validates everything, stores the inputs, and creates the run's
// root action QUEUED. Any failure is returned to the caller: a run is either
// created ready to execute or not created at all.
//
// Order matters, for a rejected request must change nothing and a crash
// must lose nothing: first every check that writes nothing (the request,
// then whether the run exists, then AdmitWork, which may create the
// project), then the inputs, stored by content hash outside the run's
// prefix, then the row that references them. A crash after the inputs and
// before the row leaves only an unreferenced content-addressed object (the
// same thing UploadInputs leaves when CreateRun never follows); the row is
// never written before what it points at, and a duplicate run name can
// never reach, let alone replace, the existing run's files.
func (s *Service) CreateRun(ctx context.Context, req *workflow.CreateRunRequest) (*workflow.Run, error) {
	var run store.RunKey
	var scope string // the request field that names the project and domain
	named := false
	switch {
	case req.GetRunId() != nil:
		k, err := ident.Run("run_id", req.GetRunId())
		if err != nil {
			return nil, err
		}
		run, scope, named = k, "run_id", true
	case req.GetProjectId() != nil:
		org, project, domain, err := ident.Project("project_id", req.GetProjectId())
		if err != nil {
			return nil, err
		}
		run, scope = store.RunKey{Org: org, Project: project, Domain: domain, RunName: newRunName()}, "project_id"
	default:
		return nil, errs.Invalidf("run_id or project_id is required")
	}
	// The run's names become storage keys (its base, its inputs' directory):
	// names the store cannot hold are refused before anything is written.
	if err := blob.ValidatePath(scope, runBaseKey(run)); err != nil {
		return nil, err
	}
	var fromTrigger *triggered
	if req.GetTriggerName() != nil {
		var err error
		if req, fromTrigger, err = s.fromTrigger(ctx, run, req); err != nil {
			return nil, err
		}
	}
	t, err := s.resolveTask(ctx, req.GetTaskId(), req.GetTaskSpec(), "task_id", "task_spec")
	if err != nil {
		return nil, err
	}
	what, again := "task_spec", "run it again"
	if req.GetTaskSpec() == nil {
		what = fmt.Sprintf("task %s version %s (as deployed)", t.id.Name, t.id.Version)
		again = "deploy the task again (its bundle is uploaded again, to the same location), then run it"
	}
	if err := s.CheckCodeBundle(ctx, t.spec, what, again); err != nil {
		return nil, err
	}

	runSpec := proto.Clone(req.GetRunSpec()).(*task.RunSpec)
	if runSpec == nil {
		runSpec = &task.RunSpec{}
	}
	// The spec keeps run_base_dir as the client sent it: a rerun copies it
	// and gets a base of its own under the same prefix.
	base, err := s.runBase(run, runSpec.GetRunBaseDir())
	if err != nil {
		return nil, err
	}
	if runSpec.GetRunStartTime() == nil && req.GetRunStartTime() != nil {
		runSpec.RunStartTime = req.GetRunStartTime()
	}
	if p := runSpec.GetRawDataStorage().GetRawDataPrefix(); p != "" {
		if _, err := s.location("run_spec.raw_data_storage.raw_data_prefix", p); err != nil {
			return nil, err
		}
	}
	if runSpec.GetMaxActionConcurrency() < 0 {
		return nil, errs.Invalidf("run_spec.max_action_concurrency must not be negative")
	}
	if err := s.checkRelation(ctx, run, runSpec); err != nil {
		return nil, err
	}
	queue, err := s.queues.Resolve("run_spec.queue", runSpec.GetQueue())
	if err != nil {
		return nil, err
	}
	rawRunSpec, err := marshal(runSpec)
	if err != nil {
		return nil, err
	}
	inputs, err := s.runInputs(ctx, run, req)
	if err != nil {
		return nil, err
	}
	if named {
		// The insert below decides in the end; asking first keeps the
		// common duplicate (a retried or repeated submit) from writing
		// anything at all.
		if _, err := s.store.Actions.Get(ctx, run.Action(store.RootName)); err == nil {
			return nil, fmt.Errorf("run %s: %w", run, errs.ErrAlreadyExists)
		} else if !errors.Is(err, errs.ErrNotFound) {
			return nil, err
		}
	}
	if err := s.admit(ctx, run.Org, run.Project, scope+".domain", run.Domain); err != nil {
		return nil, err
	}
	inputURI := inputs.uri
	if inputs.raw != nil {
		if inputURI, _, err = s.putInputs(ctx, runlayout.OffloadedInputsDir(run.Org, run.Project, run.Domain), inputs.raw); err != nil {
			return nil, err
		}
	}

	n := t.newAction(run.Action(store.RootName))
	n.InputURI = inputURI
	n.RunOutputBase = base
	n.RunSpec = rawRunSpec
	n.CreatedBy = ident.AnonymousSubject
	if p, ok := authn.FromContext(ctx); ok {
		n.CreatedBy = p.Subject // executed_by in the answers
	}
	n.Queue, n.MaxDepth = queue.Name, queue.MaxDepth
	a, err := s.store.Actions.CreateRun(ctx, n)
	if err != nil {
		return nil, err
	}
	failpoint.Hit(failpoint.CreateRunCommitted)
	if fromTrigger != nil {
		s.recordTriggered(ctx, run, fromTrigger)
	}
	if e := s.executor(); e != nil {
		e.Submit(a.ActionKey)
	}
	return &workflow.Run{Action: ActionOf(a)}, nil
}

// location maps a storage location a request names in field to its key. The
// error says which field and why: outside the store, or not a valid key
// (blob.ValidateKey's rules, which keep native paths intact).
func (s *Service) location(field, uri string) (string, error) {
	key, err := s.blobs.Key(uri)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return key, nil
}

// runBase is the run's output base, which belongs to the run alone: the
// default layout, or <org>/<project>/<domain>/<run> under a requested prefix
// that lies in our storage (as the reference lays it out). Never the
// requested dir itself: a rerun sends its source's run_base_dir, and two
// runs writing one base would overwrite each other's outputs.
func (s *Service) runBase(run store.RunKey, requested string) (string, error) {
	if requested == "" {
		return s.blobs.URI(runBaseKey(run)), nil
	}
	prefix := strings.TrimRight(requested, "/")
	if _, err := s.location("run_spec.run_base_dir", prefix); err != nil {
		return "", err
	}
	base := runlayout.RunBaseUnder(prefix, run.Org, run.Project, run.Domain, run.RunName)
	if _, err := s.location("run_spec.run_base_dir", base); err != nil {
		return "", err
	}
	return base, nil
}

// offloadedInputs is the storage key of the directory of offloaded inputs
// uri names (with or without its inputs.pb), which must be inputs that
// UploadInputs stored for run's project and domain.
func (s *Service) offloadedInputs(field, uri string, run store.RunKey) (string, error) {
	key, err := s.location(field, strings.TrimSuffix(strings.TrimRight(uri, "/"), "/"+runlayout.InputsFile))
	if err != nil {
		return "", err
	}
	if !runlayout.IsOffloadedInputsKeyOf(key, run.Org, run.Project, run.Domain) {
		return "", errs.Invalidf("%s %q is not inputs uploaded for project %s, domain %s: upload them with UploadInputs for this project", field, uri, run.Project, run.Domain)
	}
	return key, nil
}

// runInputs is what a CreateRun request says about its inputs: the
// directory of offloaded ones (checked to exist), or the encoding of inline
// ones, which CreateRun stores once nothing else can refuse the run.
type runInputs struct {
	uri string
	raw []byte
}

func (s *Service) runInputs(ctx context.Context, run store.RunKey, req *workflow.CreateRunRequest) (runInputs, error) {
	if off := req.GetOffloadedInputData(); off != nil {
		key, err := s.offloadedInputs("offloaded_input_data.uri", off.GetUri(), run)
		if err != nil {
			return runInputs{}, err
		}
		ok, err := s.blobs.Exists(ctx, path.Join(key, runlayout.InputsFile))
		if err != nil {
			return runInputs{}, err
		}
		if !ok {
			return runInputs{}, errs.Invalidf("offloaded_input_data.uri %q holds no inputs: upload them with UploadInputs first", off.GetUri())
		}
		return runInputs{uri: s.blobs.URI(key)}, nil
	}
	inputs := req.GetInputs()
	if inputs == nil {
		inputs = &task.Inputs{}
	}
	raw, err := marshal(inputs)
	if err != nil {
		return runInputs{}, errs.Invalidf("inputs cannot be serialized: %v", err)
	}
	return runInputs{raw: raw}, nil
}

// admit asks the one rule for new work (store.Projects.AdmitWork, with
// projects.autoCreate) whether the project and domain take it.
func (s *Service) admit(ctx context.Context, org, project, domainField, domain string) error {
	_, created, err := s.store.Projects.AdmitWork(ctx, org, project, domainField, domain, s.projects.AutoCreate)
	if created {
		s.log.InfoContext(ctx, "project created on first use", "org", org, "project", project)
	}
	return err
}

// putInputs stores encoded inputs at parent/<sha256 of raw>/inputs.pb and
// returns that directory's URI and the hash. An object already there holds
// these very bytes (its name is their hash); writing them again only
// renews its age.
func (s *Service) putInputs(ctx context.Context, parent string, raw []byte) (uri, hash string, err error) {
	sum := sha256.Sum256(raw)
	hash = hex.EncodeToString(sum[:])
	dir := path.Join(parent, hash)
	key := path.Join(dir, runlayout.InputsFile)
	// Written again when it exists (the same bytes): its age is the last
	// use, and the retention collector leaves inputs younger than its
	// grace period alone, so it never takes inputs a new run is about to
	// reference (internal/retention).
	if err := s.blobs.Put(ctx, key, raw, nil); err != nil {
		return "", "", err
	}
	return s.blobs.URI(dir), hash, nil
}

// WriteInputs implements UploadInputs: inputs are stored by content hash so
// that uploading the same inputs twice yields the same location. They are
// the first half of a run, so the project and domain must admit new work.
func (s *Service) WriteInputs(ctx context.Context, req *dataproxy.UploadInputsRequest) (*common.OffloadedInputData, error) {
	var org, project, domain, scope string
	switch {
	case req.GetRunId() != nil:
		k, err := ident.Run("run_id", req.GetRunId())
		if err != nil {
			return nil, err
		}
		org, project, domain, scope = k.Org, k.Project, k.Domain, "run_id"
	case req.GetProjectId() != nil:
		var err error
		if org, project, domain, err = ident.Project("project_id", req.GetProjectId()); err != nil {
			return nil, err
		}
		scope = "project_id"
	default:
		return nil, errs.Invalidf("run_id or project_id is required")
	}
	if req.GetTriggerName() != nil {
		return nil, errs.Invalidf("trigger_name: trigger inputs are not supported yet")
	}
	if req.GetTaskId() != nil || req.GetTaskSpec() != nil {
		if _, err := s.resolveTask(ctx, req.GetTaskId(), req.GetTaskSpec(), "task_id", "task_spec"); err != nil {
			return nil, err
		}
	}
	inputs := req.GetInputs()
	if inputs == nil {
		inputs = &task.Inputs{}
	}
	raw, err := marshal(inputs)
	if err != nil {
		return nil, errs.Invalidf("inputs cannot be serialized: %v", err)
	}
	parent := runlayout.OffloadedInputsDir(org, project, domain)
	if base := req.GetBaseDir(); base != "" {
		k, err := s.location("base_dir", strings.TrimRight(base, "/"))
		if err != nil {
			return nil, err
		}
		// Below the project's own scope, as a run base is: the prefix may
		// be anywhere, even in another project's data, which must not
		// see or take these inputs.
		parent = runlayout.OffloadedInputsUnder(k, org, project, domain)
	}
	if err := s.admit(ctx, org, project, scope+".domain", domain); err != nil {
		return nil, err
	}
	uri, hash, err := s.putInputs(ctx, parent, raw)
	if err != nil {
		return nil, err
	}
	return &common.OffloadedInputData{Uri: uri, InputsHash: hash}, nil
}

// Enqueue creates a child action (ActionsService.Enqueue,
// QueueService.EnqueueAction). Re-submitting the same action is a success;
// enqueueing under an aborted or finished parent answers ErrAborted. A child
// belongs to a run its project admitted at CreateRun, so it is not asked
// again: archiving a project stops new runs, not the runs in flight.
func (s *Service) Enqueue(ctx context.Context, a *actions.Action) error {
	key, err := ident.Action("action.action_id", a.GetActionId())
	if err != nil {
		return err
	}
	parentName := a.GetParentActionName()
	if parentName == "" {
		return errs.Invalidf("action.parent_action_name is required: runs are created with CreateRun")
	}
	if err := ident.ActionName("action.parent_action_name", parentName); err != nil {
		return err
	}
	if a.GetInputUri() == "" || a.GetRunOutputBase() == "" {
		return errs.Invalidf("action.input_uri and action.run_output_base are required")
	}
	for field, uri := range map[string]string{"action.input_uri": a.GetInputUri(), "action.run_output_base": a.GetRunOutputBase()} {
		if _, err := s.location(field, strings.TrimRight(uri, "/")); err != nil {
			return err
		}
	}
	parent, err := s.store.Actions.Get(ctx, key.RunKey.Action(parentName))
	if err != nil {
		return fmt.Errorf("parent action %s: %w", parentName, err)
	}
	if parent.AbortRequestedAt != nil || parent.Phase.Terminal() {
		return fmt.Errorf("parent action %s is %s: %w", parentName, phaseName(parent.Phase, parent.AbortRequestedAt != nil), errs.ErrAborted)
	}

	var n store.NewAction
	switch spec := a.GetSpec().(type) {
	case *actions.Action_Task:
		t, err := s.resolveTask(ctx, spec.Task.GetId(), spec.Task.GetSpec(), "action.task.id", "action.task.spec")
		if err != nil {
			return err
		}
		if spec.Task.GetSpec() != nil && spec.Task.GetId() != nil {
			// The SDK sends both; the id it sends is authoritative.
			if t.id, err = ident.Task("action.task.id", spec.Task.GetId()); err != nil {
				return err
			}
		}
		n = t.newAction(key)
		if n.Queue, n.MaxDepth, err = s.childQueue(ctx, parent, spec.Task.GetQueue()); err != nil {
			return err
		}
	case *actions.Action_Trace:
		if err := checkTraceTimes(spec.Trace); err != nil {
			return err
		}
		n = traceAction(key, spec.Trace)
	case *actions.Action_Condition:
		if n, err = conditionAction(key, spec.Condition); err != nil {
			return err
		}
		if err := s.recoverCondition(ctx, &n); err != nil {
			return err
		}
	default:
		return errs.Invalidf("action.task, action.trace or action.condition is required")
	}
	n.ParentName = parentName
	n.InputURI = a.GetInputUri()
	n.RunOutputBase = strings.TrimRight(a.GetRunOutputBase(), "/")
	n.Group = a.GetGroup()
	n.CreatedBy = a.GetSubject()
	n.CacheKey = a.GetTask().GetCacheKey().GetValue()

	created, isNew, err := s.store.Actions.CreateChild(ctx, n)
	if err != nil {
		if errors.Is(err, errs.ErrAlreadyExists) {
			return fmt.Errorf("action %s already exists with different content: %w", key, errs.ErrAlreadyExists)
		}
		return err
	}
	if !isNew {
		return nil
	}
	failpoint.Hit(failpoint.ChildEnqueued)
	if tr := a.GetTrace(); tr != nil && tr.GetOutputs().GetOutputUri() != "" {
		if _, err := s.store.Actions.Update(ctx, key, store.AnyVersion, store.Update{OutputURI: tr.GetOutputs().GetOutputUri()}); err != nil {
			return err
		}
	}
	if !created.Phase.Terminal() {
		if e := s.executor(); e != nil {
			e.Submit(key)
		}
	}
	return nil
}

// traceAction records a @flyte.trace call: it ran inside its parent and
// arrives already finished.
// checkTraceTimes refuses a trace's times that are not valid timestamps
// (years 1 to 9999): the database would store them, and then every read of
// the run would fail to scan them back.
func checkTraceTimes(tr *workflow.TraceAction) error {
	for _, t := range []struct {
		field string
		ts    *timestamppb.Timestamp
	}{{"action.trace.start_time", tr.GetStartTime()}, {"action.trace.end_time", tr.GetEndTime()}} {
		if t.ts != nil && t.ts.CheckValid() != nil {
			return errs.Invalidf("%s is not a valid timestamp (years 1 to 9999, nanos under a second)", t.field)
		}
	}
	return nil
}

func traceAction(key store.ActionKey, tr *workflow.TraceAction) store.NewAction {
	n := store.NewAction{Key: key, ActionType: store.ActionTypeTrace, ShortName: tr.GetName(), Phase: phase.FromProto(tr.GetPhase())}
	if !n.Phase.Terminal() {
		n.Phase = phase.Succeeded
	}
	if tr.GetStartTime() != nil {
		n.CreatedAt = tr.GetStartTime().AsTime()
	}
	if tr.GetEndTime() != nil {
		n.EndedAt = tr.GetEndTime().AsTime()
	}
	return n
}

func phaseName(p phase.Phase, abortRequested bool) string {
	if abortRequested && !p.Terminal() {
		return "being aborted"
	}
	return strings.ToLower(p.String())
}
