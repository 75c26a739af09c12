package authz

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"fmgr.dev/internal/authn"
)

// TaskScope is what the request of a procedure a task credential may call
// must name.
type TaskScope int

// Task scopes.
const (
	// TaskRun: the request names the task's own run (every run
	// identifier in it is that run).
	TaskRun TaskScope = iota + 1
	// TaskProject: the request names the task's project and domain (and
	// no other run).
	TaskProject
	// TaskSelf: the request is about the caller itself.
	TaskSelf
)

// TaskProcedures are the only procedures a task credential
// (authn.KindTask) may call: what the SDK inside a task calls to enqueue,
// watch and abort its children, record traces, use the cache, upload
// files and read its project's tasks and its own run. Nothing else: no
// other run, no listing of runs, no deploying, no secrets, no
// administration.
var TaskProcedures = map[string]TaskScope{
	"/flyteidl2.actions.ActionsService/Abort":           TaskRun,
	"/flyteidl2.actions.ActionsService/Enqueue":         TaskRun,
	"/flyteidl2.actions.ActionsService/Signal":          TaskRun,
	"/flyteidl2.actions.ActionsService/Update":          TaskRun,
	"/flyteidl2.actions.ActionsService/WatchForUpdates": TaskRun,

	"/flyteidl2.workflow.QueueService/AbortQueuedAction": TaskRun,
	"/flyteidl2.workflow.QueueService/AbortQueuedRun":    TaskRun,
	"/flyteidl2.workflow.QueueService/EnqueueAction":     TaskRun,
	"/flyteidl2.workflow.StateService/Get":               TaskRun,
	"/flyteidl2.workflow.StateService/Put":               TaskRun,
	"/flyteidl2.workflow.StateService/Watch":             TaskRun,
	"/flyteidl2.workflow.EventsProxyService/Record":      TaskRun,

	"/flyteidl2.workflow.RunService/AbortAction":        TaskRun,
	"/flyteidl2.workflow.RunService/GetActionData":      TaskRun,
	"/flyteidl2.workflow.RunService/GetActionDataURIs":  TaskRun,
	"/flyteidl2.workflow.RunService/GetActionDetails":   TaskRun,
	"/flyteidl2.workflow.RunService/GetRunDetails":      TaskRun,
	"/flyteidl2.workflow.RunService/ListActions":        TaskRun,
	"/flyteidl2.workflow.RunService/WatchActionDetails": TaskRun,
	"/flyteidl2.workflow.RunService/WatchActions":       TaskRun,
	"/flyteidl2.workflow.RunService/WatchRunDetails":    TaskRun,
	"/flyteidl2.workflow.RunService/SignalEvent":        TaskRun,

	"/flyteidl2.dataproxy.DataProxyService/GetActionData":        TaskRun,
	"/flyteidl2.dataproxy.DataProxyService/CreateUploadLocation": TaskProject,
	"/flyteidl2.dataproxy.DataProxyService/UploadInputs":         TaskProject,

	"/flyteidl2.cacheservice.v2.CacheService/Get":                    TaskProject,
	"/flyteidl2.cacheservice.v2.CacheService/Put":                    TaskProject,
	"/flyteidl2.cacheservice.v2.CacheService/GetOrExtendReservation": TaskProject,
	"/flyteidl2.cacheservice.v2.CacheService/ReleaseReservation":     TaskProject,

	"/flyteidl2.task.TaskService/GetTaskDetails": TaskProject,
	"/flyteidl2.task.TaskService/ListTasks":      TaskProject,
	"/flyteidl2.task.TaskService/ListVersions":   TaskProject,

	"/flyteidl2.auth.IdentityService/UserInfo": TaskSelf,
}

// Internal are the procedures only the manager's tasks (and the manager
// itself, which calls them in-process) may call: events and status of
// actions, and cache writes. (Enqueueing a child is not: the SDK's hybrid
// mode runs a parent on the user's machine, with the user's key.) No API key, whatever
// its role, may: a key's holder would forge a run's history or poison the
// cache of every run that hits it.
var Internal = map[string]bool{
	"/flyteidl2.workflow.EventsProxyService/Record":                   true,
	"/flyteidl2.workflow.InternalRunService/RecordAction":             true,
	"/flyteidl2.workflow.InternalRunService/UpdateActionStatus":       true,
	"/flyteidl2.workflow.InternalRunService/RecordActionStream":       true,
	"/flyteidl2.workflow.InternalRunService/RecordActionEvents":       true,
	"/flyteidl2.workflow.InternalRunService/RecordActionEventStream":  true,
	"/flyteidl2.workflow.InternalRunService/UpdateActionStatusStream": true,
	"/flyteidl2.workflow.StateService/Put":                            true,
	"/flyteidl2.actions.ActionsService/Update":                        true,
	"/flyteidl2.cacheservice.CacheService/Put":                        true,
	"/flyteidl2.cacheservice.CacheService/Delete":                     true,
	"/flyteidl2.cacheservice.CacheService/GetOrExtendReservation":     true,
	"/flyteidl2.cacheservice.CacheService/ReleaseReservation":         true,
	"/flyteidl2.cacheservice.v2.CacheService/Put":                     true,
	"/flyteidl2.cacheservice.v2.CacheService/Delete":                  true,
	"/flyteidl2.cacheservice.v2.CacheService/GetOrExtendReservation":  true,
	"/flyteidl2.cacheservice.v2.CacheService/ReleaseReservation":      true,
}

// runIdentifier is flyteidl2.common.RunIdentifier.
const runIdentifier = "flyteidl2.common.RunIdentifier"

// AllowedTask reports whether a task of run may call procedure with msg
// (nil for a stream whose request is not read yet: only TaskSelf
// procedures pass then).
func AllowedTask(run authn.RunScope, procedure string, msg proto.Message) bool {
	scope, ok := TaskProcedures[procedure]
	if !ok {
		return false
	}
	if scope == TaskSelf {
		return true
	}
	if msg == nil {
		return false
	}
	runs := RunsNamed(msg)
	for _, r := range runs {
		if r.Name != run.Run || r.Project != run.Project || r.Domain != run.Domain || (r.Org != "" && run.Org != "" && r.Org != run.Org) {
			return false
		}
	}
	project, domain, named := Scope(msg)
	if !named && len(runs) > 0 {
		project, domain, named = runs[0].Project, runs[0].Domain, true
	}
	if !named || project != run.Project || domain != run.Domain {
		return false
	}
	return scope != TaskRun || len(runs) > 0
}

// RunNamed is one run identifier of a request.
type RunNamed struct{ Org, Project, Domain, Name string }

// maxRunsDepth bounds how deep RunsNamed looks: the identifiers a
// procedure acts on are near the top of its request (an action's id, its
// parent's, a run's); what lies deeper is data (a task spec, literals).
const maxRunsDepth = 4

// RunsNamed lists every run identifier in m, in singular, repeated and map
// message fields down to maxRunsDepth.
func RunsNamed(m proto.Message) []RunNamed {
	var runs []RunNamed
	var walk func(msg protoreflect.Message, depth int)
	walk = func(msg protoreflect.Message, depth int) {
		if msg.Descriptor().FullName() == runIdentifier {
			f := msg.Descriptor().Fields()
			runs = append(runs, RunNamed{
				Org: stringField(msg, f.ByName("org")), Project: stringField(msg, f.ByName("project")),
				Domain: stringField(msg, f.ByName("domain")), Name: stringField(msg, f.ByName("name")),
			})
			return
		}
		msg.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			isMsg := f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind
			if f.IsMap() {
				isMsg = f.MapValue().Kind() == protoreflect.MessageKind
			}
			if !isMsg {
				return true
			}
			if depth >= maxRunsDepth {
				return false
			}
			switch {
			case f.IsList():
				l := v.List()
				for i := range l.Len() {
					walk(l.Get(i).Message(), depth+1)
				}
			case f.IsMap():
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message(), depth+1)
					return true
				})
			default:
				walk(v.Message(), depth+1)
			}
			return true
		})
	}
	walk(m.ProtoReflect(), 0)
	return runs
}
