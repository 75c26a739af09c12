package authz

// Procedures is the action every routed procedure needs. A procedure
// missing here is refused to every authenticated caller (fail closed);
// manager/compose's TestEveryRoutedProcedureHasAPermission fails when a
// mounted service has one. Anonymous procedures (authn.Anonymous) are not
// checked. IdentityService.UserInfo answers the caller itself: View.
var Procedures = map[string]Action{
	"/flyteidl2.actions.ActionsService/Abort":           Execute,
	"/flyteidl2.actions.ActionsService/Enqueue":         Execute,
	"/flyteidl2.actions.ActionsService/Signal":          Execute,
	"/flyteidl2.actions.ActionsService/Update":          Execute,
	"/flyteidl2.actions.ActionsService/WatchForUpdates": View,

	"/flyteidl2.app.AppLogsService/TailLogs":   View,
	"/flyteidl2.app.AppService/Create":         Register,
	"/flyteidl2.app.AppService/Delete":         Register,
	"/flyteidl2.app.AppService/Get":            View,
	"/flyteidl2.app.AppService/Lease":          Admin,
	"/flyteidl2.app.AppService/List":           View,
	"/flyteidl2.app.AppService/Update":         Register,
	"/flyteidl2.app.AppService/UpdateStatus":   Admin,
	"/flyteidl2.app.AppService/Watch":          View,
	"/flyteidl2.auth.IdentityService/UserInfo": View,

	"/flyteidl2.cacheservice.CacheService/Delete":                    Execute,
	"/flyteidl2.cacheservice.CacheService/Get":                       View,
	"/flyteidl2.cacheservice.CacheService/GetOrExtendReservation":    Execute,
	"/flyteidl2.cacheservice.CacheService/Put":                       Execute,
	"/flyteidl2.cacheservice.CacheService/ReleaseReservation":        Execute,
	"/flyteidl2.cacheservice.v2.CacheService/Delete":                 Execute,
	"/flyteidl2.cacheservice.v2.CacheService/Get":                    View,
	"/flyteidl2.cacheservice.v2.CacheService/GetOrExtendReservation": Execute,
	"/flyteidl2.cacheservice.v2.CacheService/Put":                    Execute,
	"/flyteidl2.cacheservice.v2.CacheService/ReleaseReservation":     Execute,

	"/flyteidl2.cluster.ClusterService/SelectCluster": View,

	"/flyteidl2.dataproxy.DataProxyService/CreateDownloadLink":   View,
	"/flyteidl2.dataproxy.DataProxyService/CreateUploadLocation": Execute,
	"/flyteidl2.dataproxy.DataProxyService/GetActionData":        View,
	"/flyteidl2.dataproxy.DataProxyService/TailLogs":             View,
	"/flyteidl2.dataproxy.DataProxyService/UploadInputs":         Execute,

	"/flyteidl2.imagebuilder.ImageService/GetImage": View,

	"/flyteidl2.project.ProjectService/CreateProject": Admin,
	"/flyteidl2.project.ProjectService/GetProject":    View,
	"/flyteidl2.project.ProjectService/ListProjects":  View,
	"/flyteidl2.project.ProjectService/UpdateProject": Admin,

	"/flyteidl2.secret.SecretService/CreateSecret": Register,
	"/flyteidl2.secret.SecretService/DeleteSecret": Register,
	"/flyteidl2.secret.SecretService/GetSecret":    Register,
	"/flyteidl2.secret.SecretService/ListSecrets":  Register,
	"/flyteidl2.secret.SecretService/UpdateSecret": Register,

	"/flyteidl2.task.TaskService/DeployTask":     Register,
	"/flyteidl2.task.TaskService/GetTaskDetails": View,
	"/flyteidl2.task.TaskService/ListTasks":      View,
	"/flyteidl2.task.TaskService/ListVersions":   View,

	"/flyteidl2.trigger.TriggerService/DeleteTriggers":            Register,
	"/flyteidl2.trigger.TriggerService/DeployTrigger":             Register,
	"/flyteidl2.trigger.TriggerService/GetTriggerDetails":         View,
	"/flyteidl2.trigger.TriggerService/GetTriggerRevisionDetails": View,
	"/flyteidl2.trigger.TriggerService/GetTriggerRevisionHistory": View,
	"/flyteidl2.trigger.TriggerService/ListTriggers":              View,
	"/flyteidl2.trigger.TriggerService/UpdateTriggers":            Register,

	// The executor's own calls: only an administrator (or the manager).
	"/flyteidl2.workflow.EventsProxyService/Record":                   Admin,
	"/flyteidl2.workflow.QueueService/AbortQueuedAction":              Execute,
	"/flyteidl2.workflow.QueueService/AbortQueuedRun":                 Execute,
	"/flyteidl2.workflow.QueueService/EnqueueAction":                  Execute,
	"/flyteidl2.workflow.InternalRunService/RecordAction":             Admin,
	"/flyteidl2.workflow.InternalRunService/UpdateActionStatus":       Admin,
	"/flyteidl2.workflow.InternalRunService/RecordActionStream":       Admin,
	"/flyteidl2.workflow.InternalRunService/RecordActionEvents":       Admin,
	"/flyteidl2.workflow.InternalRunService/RecordActionEventStream":  Admin,
	"/flyteidl2.workflow.InternalRunService/UpdateActionStatusStream": Admin,

	"/flyteidl2.workflow.RunService/AbortAction":         Execute,
	"/flyteidl2.workflow.RunService/AbortRun":            Execute,
	"/flyteidl2.workflow.RunService/CreateRun":           Execute,
	"/flyteidl2.workflow.RunService/GetActionData":       View,
	"/flyteidl2.workflow.RunService/GetActionDataURIs":   View,
	"/flyteidl2.workflow.RunService/GetActionDetails":    View,
	"/flyteidl2.workflow.RunService/GetActionLogContext": View,
	"/flyteidl2.workflow.RunService/GetRunDetails":       View,
	"/flyteidl2.workflow.RunService/ListActions":         View,
	"/flyteidl2.workflow.RunService/ListRuns":            View,
	"/flyteidl2.workflow.RunService/SignalEvent":         Execute,
	"/flyteidl2.workflow.RunService/WatchActionDetails":  View,
	"/flyteidl2.workflow.RunService/WatchActions":        View,
	"/flyteidl2.workflow.RunService/WatchClusterEvents":  View,
	"/flyteidl2.workflow.RunService/WatchGroups":         View,
	"/flyteidl2.workflow.RunService/WatchRunDetails":     View,
	"/flyteidl2.workflow.RunService/WatchRuns":           View,

	"/flyteidl2.workflow.StateService/Get":   View,
	"/flyteidl2.workflow.StateService/Put":   Execute,
	"/flyteidl2.workflow.StateService/Watch": View,

	"/flyteidl2.workflow.TranslatorService/JsonValuesToLiterals":     View,
	"/flyteidl2.workflow.TranslatorService/LaunchFormJsonToLiterals": View,
	"/flyteidl2.workflow.TranslatorService/LiteralsToLaunchFormJson": View,
	"/flyteidl2.workflow.TranslatorService/TaskSpecToLaunchFormJson": View,
}

// Unscoped are the procedures a caller with the action on any project may
// call without naming one: nothing in their answers belongs to a project
// the caller has no role on, beyond project names.
var Unscoped = map[string]bool{
	"/flyteidl2.auth.IdentityService/UserInfo":        true,
	"/flyteidl2.project.ProjectService/GetProject":    true,
	"/flyteidl2.cluster.ClusterService/SelectCluster": true,
	// Whether an image of a name was built: images are the manager's,
	// keyed by content, and the SDK may name no project.
	"/flyteidl2.imagebuilder.ImageService/GetImage":                  true,
	"/flyteidl2.workflow.TranslatorService/JsonValuesToLiterals":     true,
	"/flyteidl2.workflow.TranslatorService/LaunchFormJsonToLiterals": true,
	"/flyteidl2.workflow.TranslatorService/LiteralsToLaunchFormJson": true,
	"/flyteidl2.workflow.TranslatorService/TaskSpecToLaunchFormJson": true,
}

// Filtered are the lists whose answers are filtered to the projects the
// caller has the procedure's action on (internal/server drops the other
// items, in unary answers and watch streams): a request naming no project
// needs the action on some project only.
var Filtered = map[string]bool{
	"/flyteidl2.workflow.RunService/ListRuns":        true,
	"/flyteidl2.workflow.RunService/WatchRuns":       true,
	"/flyteidl2.project.ProjectService/ListProjects": true,
	"/flyteidl2.task.TaskService/ListTasks":          true,
	"/flyteidl2.app.AppService/List":                 true,
	"/flyteidl2.app.AppService/Watch":                true,
	"/flyteidl2.trigger.TriggerService/ListTriggers": true,
	"/flyteidl2.secret.SecretService/ListSecrets":    true,
}
