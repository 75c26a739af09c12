package main

// The fuzz harness's fixture and every procedure's valid request.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"fmgr.dev/gen/go/flyteidl2/task"
)

// blobsPlaceholder stands for the manager's storage root (a temporary
// directory) in requests: a string that starts with it is rewritten before
// the request is sent, so the committed corpus can name valid blob URIs.
const blobsPlaceholder = "@BLOBS@"

// JSON building blocks of the requests below.
const (
	fxProject  = `"project":"flytesnacks","domain":"development"`
	fxProjID   = `{"name":"flytesnacks","domain":"development"}`
	fxCacheID  = `{"project":"flytesnacks","domain":"development"}`
	fxRun      = `{` + fxProject + `,"name":"fuzzrun"}`
	fxAbortRun = `{` + fxProject + `,"name":"fuzzabort"}`
	fxRoot     = `{"run":` + fxRun + `,"name":"a0"}`
	fxAbortA0  = `{"run":` + fxAbortRun + `,"name":"a0"}`
	fxTaskID   = `{` + fxProject + `,"name":"fuzz.task","version":"v1"}`
	fxInputs   = `{"literals":[{"name":"x","value":{"scalar":{"primitive":{"integer":"7"}}}}]}`
)

// fxFile is the inputs.pb the fixture's UploadInputs stores (below its
// base_dir, under the project's scope and the hash of fxInputs, as
// UploadInputs names it).
var fxFile = func() string {
	var in task.Inputs
	if err := protojson.Unmarshal([]byte(fxInputs), &in); err != nil {
		panic(err)
	}
	sum := sha256.Sum256(wireOf(&in))
	return blobsPlaceholder + "/fuzz/file/offloaded-inputs/_/flytesnacks/development/" + hex.EncodeToString(sum[:]) + "/inputs.pb"
}()

// fxSpec is a TaskSpec of task name/version whose container would run
// args (never run here: the harness has no executor).
func fxSpec(name, version string) string {
	return `{"taskTemplate":{"id":{"resourceType":"TASK",` + fxProject + `,"name":"` + name + `","version":"` + version + `"},` +
		`"type":"python","interface":{"inputs":{"variables":[{"key":"x","value":{"type":{"simple":"INTEGER"}}}]}},` +
		`"metadata":{"retries":{"retries":1}},` +
		`"container":{"image":"python:3.12","args":["a0","--inputs","{{.input}}","--outputs-path","{{.outputPrefix}}"]}}}`
}

// fxChild is an Action that enqueues child name under fuzzrun's root.
func fxChild(name string) string {
	return `"actionId":{"run":` + fxRun + `,"name":"` + name + `"},"parentActionName":"a0",` +
		`"inputUri":"` + blobsPlaceholder + `/fuzz/` + name + `/inputs.pb","runOutputBase":"` + blobsPlaceholder + `/fuzz/out",` +
		`"task":{"id":` + fxTaskID + `,"spec":` + fxSpec("fuzz.task", "v1") + `}`
}

// fixture is created before fuzzing, in this order, through the procedures
// themselves: a deployed task, a run with a child action the other requests
// read, and a run that the abort requests abort.
var fixture = []struct{ procedure, request string }{
	{"flyteidl2.task.TaskService/DeployTask", `{"taskId":` + fxTaskID + `,"spec":` + fxSpec("fuzz.task", "v1") + `}`},
	{"flyteidl2.workflow.RunService/CreateRun", `{"runId":` + fxRun + `,"taskSpec":` + fxSpec("fuzz.task", "v1") + `,"inputs":` + fxInputs + `}`},
	{"flyteidl2.actions.ActionsService/Enqueue", `{"action":{` + fxChild("fuzzchild") + `}}`},
	// A blob (fxFile), and a child whose storage lies under it, where no
	// object can be.
	{"flyteidl2.dataproxy.DataProxyService/UploadInputs", `{"projectId":` + fxProjID + `,"taskId":` + fxTaskID + `,"inputs":` + fxInputs + `,"baseDir":"` + blobsPlaceholder + `/fuzz/file"}`},
	{"flyteidl2.actions.ActionsService/Enqueue", `{"action":{"actionId":{"run":` + fxRun + `,"name":"fuzzchild-odd"},"parentActionName":"a0",` +
		`"inputUri":"` + fxFile + `/deeper","runOutputBase":"` + fxFile + `","task":{"id":` + fxTaskID + `}}}`},
	{"flyteidl2.workflow.RunService/CreateRun", `{"runId":` + fxAbortRun + `,"taskId":` + fxTaskID + `,"inputs":` + fxInputs + `}`},
	// A condition waiting for an int, which the signal requests signal.
	{"flyteidl2.actions.ActionsService/Enqueue", `{"action":{"actionId":{"run":` + fxRun + `,"name":"fuzzcond"},"parentActionName":"a0",` +
		`"inputUri":"` + blobsPlaceholder + `/fuzz/fuzzcond/inputs.pb","runOutputBase":"` + blobsPlaceholder + `/fuzz/out",` +
		`"condition":{"name":"count","type":{"simple":"INTEGER"},"prompt":"How many?"}}}`},
}

// fxApp is an app's identifier in the fixture's project; fxAppSpec a spec
// that the harness stores and never runs.
func fxApp(name string) string { return `{` + fxProject + `,"name":"` + name + `"}` }

const fxAppSpec = `{"container":{"image":"x","args":["true"]},"ingress":{}}`

// fxCond is the fixture's condition.
const fxCond = `{"run":` + fxRun + `,"name":"fuzzcond"}`

// seedRequest is a procedure's valid request and the code it answers when
// it is the first request after the fixture: "ok", or the precise code of a
// procedure that cannot succeed here (Unimplemented; NotFound for data the
// executor would have produced).
type seedRequest struct {
	request string
	want    string
}

// unimplemented is the seed of a procedure this build does not implement:
// any well-formed request answers Unimplemented.
var unimplemented = seedRequest{`{}`, "unimplemented"}

// fxTrigger is a TriggerName of the fixture's task.
func fxTrigger(name string) string {
	return `{` + fxProject + `,"taskName":"fuzz.task","name":"` + name + `"}`
}

// seeds has one entry per served procedure; TestFuzzProcedures fails when a
// served procedure has none, so a new procedure cannot go unfuzzed.
var seeds = map[string]seedRequest{
	"flyteidl2.actions.ActionsService/Abort":           {`{"actionId":` + fxAbortA0 + `,"reason":"fuzz"}`, "ok"},
	"flyteidl2.actions.ActionsService/Enqueue":         {`{"action":{` + fxChild("fuzzchild-enqueue") + `}}`, "ok"},
	"flyteidl2.actions.ActionsService/Signal":          {`{"actionId":` + fxCond + `,"parentActionName":"a0","value":{"scalar":{"primitive":{"integer":"7"}}}}`, "ok"},
	"flyteidl2.actions.ActionsService/Update":          {`{"actionId":` + fxRoot + `,"attempt":1,"status":{"phase":"ACTION_PHASE_RUNNING"}}`, "unimplemented"},
	"flyteidl2.actions.ActionsService/WatchForUpdates": {`{"parentActionId":` + fxRoot + `}`, "ok"},

	// An app the fuzz harness stores (its replicas never run: the harness
	// drops the apps worker with the executor's).
	"flyteidl2.app.AppLogsService/TailLogs": {`{"appId":` + fxApp("fuzzapp-missing") + `}`, "not_found"},
	"flyteidl2.app.AppService/Create":       {`{"app":{"metadata":{"id":` + fxApp("fuzzapp") + `},"spec":` + fxAppSpec + `}}`, "ok"},
	"flyteidl2.app.AppService/Delete":       {`{"appId":` + fxApp("fuzzapp-missing") + `}`, "not_found"},
	"flyteidl2.app.AppService/Get":          {`{"appId":` + fxApp("fuzzapp-missing") + `}`, "not_found"},
	"flyteidl2.app.AppService/Lease":        {`{}`, "invalid_argument"},
	"flyteidl2.app.AppService/List":         {`{"project":{"name":"flytesnacks","domain":"development"}}`, "ok"},
	"flyteidl2.app.AppService/Update":       {`{"app":{"metadata":{"id":` + fxApp("fuzzapp-missing") + `},"spec":` + fxAppSpec + `}}`, "not_found"},
	"flyteidl2.app.AppService/UpdateStatus": {`{"app":{"metadata":{"id":` + fxApp("fuzzapp-missing") + `},"status":{}}}`, "not_found"},
	"flyteidl2.app.AppService/Watch":        {`{}`, "invalid_argument"},

	// An image no build made.
	"flyteidl2.imagebuilder.ImageService/GetImage": {`{"id":{"name":"fuzz-missing:v1"}}`, "not_found"},

	// Authentication is not configured: the SDK is told so with Unimplemented.
	"flyteidl2.auth.AuthMetadataService/GetOAuth2Metadata":     unimplemented,
	"flyteidl2.auth.AuthMetadataService/GetPublicClientConfig": unimplemented,
	"flyteidl2.auth.IdentityService/UserInfo":                  {`{}`, "ok"},

	// Keys no request puts are NotFound; the others succeed.
	"flyteidl2.cacheservice.CacheService/Delete":                 {`{"key":"fuzz-missing"}`, "not_found"},
	"flyteidl2.cacheservice.CacheService/Get":                    {`{"key":"fuzz-missing"}`, "not_found"},
	"flyteidl2.cacheservice.CacheService/GetOrExtendReservation": {`{"key":"fuzz-k","ownerId":"fuzz","heartbeatInterval":"5s"}`, "ok"},
	"flyteidl2.cacheservice.CacheService/Put":                    {`{"key":"fuzz-k","output":{"outputUri":"` + blobsPlaceholder + `/fuzz/out"}}`, "ok"},
	"flyteidl2.cacheservice.CacheService/ReleaseReservation":     {`{"key":"fuzz-k","ownerId":"fuzz"}`, "ok"},

	"flyteidl2.cacheservice.v2.CacheService/Delete":                 {`{"identifier":` + fxCacheID + `,"baseRequest":{"key":"fuzz-missing"}}`, "not_found"},
	"flyteidl2.cacheservice.v2.CacheService/Get":                    {`{"identifier":` + fxCacheID + `,"baseRequest":{"key":"fuzz-missing"}}`, "not_found"},
	"flyteidl2.cacheservice.v2.CacheService/GetOrExtendReservation": {`{"identifier":` + fxCacheID + `,"baseRequest":{"key":"fuzz-k","ownerId":"fuzz"}}`, "ok"},
	"flyteidl2.cacheservice.v2.CacheService/Put":                    {`{"identifier":` + fxCacheID + `,"baseRequest":{"key":"fuzz-k","output":{"outputUri":"` + blobsPlaceholder + `/runs/_/flytesnacks/development/fuzzrun/a0/1"}}}`, "ok"},
	"flyteidl2.cacheservice.v2.CacheService/ReleaseReservation":     {`{"identifier":` + fxCacheID + `,"baseRequest":{"key":"fuzz-k","ownerId":"fuzz"}}`, "ok"},

	"flyteidl2.cluster.ClusterService/SelectCluster": {`{"projectId":` + fxProjID + `,"operation":"OPERATION_UPLOAD_INPUTS"}`, "ok"},

	// No attempt ran (no executor), so there is no report and no log yet.
	"flyteidl2.dataproxy.DataProxyService/CreateDownloadLink":   {`{"artifactType":"ARTIFACT_TYPE_REPORT","actionAttemptId":{"actionId":` + fxRoot + `,"attempt":1}}`, "not_found"},
	"flyteidl2.dataproxy.DataProxyService/CreateUploadLocation": {`{` + fxProject + `,"filename":"data.txt","contentMd5":"1B2M2Y8AsgTpgAmY7PhCfg==","contentLength":"0"}`, "ok"},
	"flyteidl2.dataproxy.DataProxyService/GetActionData":        {`{"actionId":` + fxRoot + `}`, "ok"},
	"flyteidl2.dataproxy.DataProxyService/TailLogs":             {`{"actionId":` + fxRoot + `}`, "not_found"},
	"flyteidl2.dataproxy.DataProxyService/UploadInputs":         {`{"projectId":` + fxProjID + `,"taskSpec":` + fxSpec("fuzz.task", "v1") + `,"inputs":` + fxInputs + `}`, "ok"},

	"flyteidl2.project.ProjectService/CreateProject": {`{"project":{"id":"fuzzproject","name":"Fuzz project","description":"made by the fuzzer"}}`, "ok"},
	"flyteidl2.project.ProjectService/GetProject":    {`{"id":"flytesnacks"}`, "ok"},
	"flyteidl2.project.ProjectService/ListProjects":  {`{"limit":10}`, "ok"},
	"flyteidl2.project.ProjectService/UpdateProject": {`{"project":{"id":"flytesnacks","name":"flytesnacks","description":"updated by the fuzzer"}}`, "ok"},

	// Whatever order the procedures run in: one secret is created, another
	// (never created) is looked up, updated and deleted.
	"flyteidl2.secret.SecretService/CreateSecret": {`{"id":{"name":"fuzz-secret","domain":"development"},"secretSpec":{"stringValue":"v"}}`, "ok"},
	"flyteidl2.secret.SecretService/DeleteSecret": {`{"id":{"name":"fuzz-absent"}}`, "not_found"},
	"flyteidl2.secret.SecretService/GetSecret":    {`{"id":{"name":"fuzz-absent"}}`, "not_found"},
	"flyteidl2.secret.SecretService/ListSecrets":  {`{"limit":10}`, "ok"},
	"flyteidl2.secret.SecretService/UpdateSecret": {`{"id":{"name":"fuzz-absent"},"secretSpec":{"binaryValue":"dg=="}}`, "not_found"},

	"flyteidl2.task.TaskService/DeployTask":     {`{"taskId":{` + fxProject + `,"name":"fuzz.task","version":"v2"},"spec":` + fxSpec("fuzz.task", "v2") + `}`, "ok"},
	"flyteidl2.task.TaskService/GetTaskDetails": {`{"taskId":` + fxTaskID + `}`, "ok"},
	"flyteidl2.task.TaskService/ListTasks":      {`{"projectId":` + fxProjID + `,"request":{"limit":10}}`, "ok"},
	"flyteidl2.task.TaskService/ListVersions":   {`{"taskName":{` + fxProject + `,"name":"fuzz.task"},"request":{"limit":10}}`, "ok"},

	// One trigger is deployed on the task version the fixture deployed;
	// another (never deployed) is looked up, updated and deleted.
	"flyteidl2.trigger.TriggerService/DeleteTriggers":            {`{"names":[` + fxTrigger("fuzz-absent") + `]}`, "not_found"},
	"flyteidl2.trigger.TriggerService/DeployTrigger":             {`{"name":` + fxTrigger("fuzz-trigger") + `,"spec":{"active":false,"taskVersion":"v1"},"automationSpec":{"type":"TYPE_SCHEDULE","schedule":{"cron":{"expression":"0 0 1 1 *","timezone":"UTC"}}}}`, "ok"},
	"flyteidl2.trigger.TriggerService/GetTriggerDetails":         {`{"name":` + fxTrigger("fuzz-absent") + `}`, "not_found"},
	"flyteidl2.trigger.TriggerService/GetTriggerRevisionDetails": {`{"id":{"name":` + fxTrigger("fuzz-absent") + `,"revision":"1"}}`, "not_found"},
	"flyteidl2.trigger.TriggerService/GetTriggerRevisionHistory": {`{"name":` + fxTrigger("fuzz-absent") + `}`, "not_found"},
	"flyteidl2.trigger.TriggerService/ListTriggers":              {`{"projectId":` + fxProjID + `,"request":{"limit":10}}`, "ok"},
	"flyteidl2.trigger.TriggerService/UpdateTriggers":            {`{"names":[` + fxTrigger("fuzz-absent") + `],"active":true}`, "not_found"},

	"flyteidl2.workflow.InternalRunService/RecordAction":             unimplemented,
	"flyteidl2.workflow.InternalRunService/RecordActionEventStream":  unimplemented,
	"flyteidl2.workflow.InternalRunService/RecordActionEvents":       unimplemented,
	"flyteidl2.workflow.InternalRunService/RecordActionStream":       unimplemented,
	"flyteidl2.workflow.InternalRunService/UpdateActionStatus":       unimplemented,
	"flyteidl2.workflow.InternalRunService/UpdateActionStatusStream": unimplemented,

	"flyteidl2.workflow.EventsProxyService/Record": {`{"events":[{"id":` + fxRoot + `,"attempt":1,"phase":"ACTION_PHASE_QUEUED","version":1,"clusterEvents":[{"message":"fuzz"}]}]}`, "ok"},

	"flyteidl2.workflow.QueueService/AbortQueuedAction": {`{"actionId":` + fxAbortA0 + `,"reason":"fuzz"}`, "ok"},
	"flyteidl2.workflow.QueueService/AbortQueuedRun":    {`{"runId":` + fxAbortRun + `,"reason":"fuzz"}`, "ok"},
	"flyteidl2.workflow.QueueService/EnqueueAction":     {`{` + fxChild("fuzzchild-queue") + `}`, "ok"},

	"flyteidl2.workflow.RunService/AbortAction":         {`{"actionId":` + fxAbortA0 + `,"reason":"fuzz"}`, "ok"},
	"flyteidl2.workflow.RunService/AbortRun":            {`{"runId":` + fxAbortRun + `,"reason":"fuzz"}`, "ok"},
	"flyteidl2.workflow.RunService/CreateRun":           {`{"projectId":` + fxProjID + `,"taskSpec":` + fxSpec("fuzz.task", "v1") + `,"inputs":` + fxInputs + `,"runSpec":{"labels":{"values":{"k":"v"}},"envs":{"values":[{"key":"A","value":"b"}]}}}`, "ok"},
	"flyteidl2.workflow.RunService/GetActionData":       {`{"actionId":` + fxRoot + `}`, "ok"},
	"flyteidl2.workflow.RunService/GetActionDataURIs":   {`{"actionId":` + fxRoot + `}`, "ok"},
	"flyteidl2.workflow.RunService/GetActionDetails":    {`{"actionId":` + fxRoot + `}`, "ok"},
	"flyteidl2.workflow.RunService/GetActionLogContext": {`{"actionId":` + fxRoot + `,"attempt":1}`, "ok"},
	"flyteidl2.workflow.RunService/GetRunDetails":       {`{"runId":` + fxRun + `}`, "ok"},
	"flyteidl2.workflow.RunService/ListActions":         {`{"runId":` + fxRun + `,"request":{"limit":10}}`, "ok"},
	"flyteidl2.workflow.RunService/ListRuns":            {`{"projectId":` + fxProjID + `,"request":{"limit":10,"sortBy":{"key":"created_at","direction":"DESCENDING"}}}`, "ok"},
	"flyteidl2.workflow.RunService/SignalEvent":         {`{"actionId":` + fxCond + `,"parentActionName":"a0","payload":{"intValue":"7"}}`, "ok"},
	"flyteidl2.workflow.RunService/WatchActionDetails":  {`{"actionId":` + fxRoot + `}`, "ok"},
	"flyteidl2.workflow.RunService/WatchActions":        {`{"runId":` + fxRun + `}`, "ok"},
	"flyteidl2.workflow.RunService/WatchClusterEvents":  {`{"id":` + fxRoot + `,"attempt":1}`, "ok"},
	"flyteidl2.workflow.RunService/WatchGroups":         {`{"projectId":` + fxProjID + `,"request":{"limit":10}}`, "ok"},
	"flyteidl2.workflow.RunService/WatchRunDetails":     {`{"runId":` + fxRun + `}`, "ok"},
	"flyteidl2.workflow.RunService/WatchRuns":           {`{"projectId":` + fxProjID + `}`, "ok"},

	// Put and Get carry controller state no SDK path uses.
	"flyteidl2.workflow.StateService/Get":   unimplemented,
	"flyteidl2.workflow.StateService/Put":   unimplemented,
	"flyteidl2.workflow.StateService/Watch": {`{"parentActionId":` + fxRoot + `}`, "ok"},

	"flyteidl2.workflow.TranslatorService/JsonValuesToLiterals":     {`{"variables":{"variables":[{"key":"x","value":{"type":{"simple":"INTEGER"}}}]},"values":{"x":7}}`, "ok"},
	"flyteidl2.workflow.TranslatorService/LaunchFormJsonToLiterals": {`{"json":{"type":"object","properties":{"x":{"type":"integer","default":7}}}}`, "ok"},
	"flyteidl2.workflow.TranslatorService/LiteralsToLaunchFormJson": {`{"variables":{"variables":[{"key":"x","value":{"type":{"simple":"INTEGER"}}}]},"actionId":` + fxRoot + `}`, "ok"},
	"flyteidl2.workflow.TranslatorService/TaskSpecToLaunchFormJson": {`{"taskSpec":` + fxSpec("fuzz.task", "v1") + `}`, "ok"},
}

// badSeeds are known-bad (and a few edge) requests kept in the corpus: each
// must answer its precise code (want; TestFuzzProcedures checks it, and that
// the message contains wantText) and, when refused, change nothing.
var badSeeds = []struct {
	name, procedure, request, want, wantText string
	// wire sets fields to values JSON cannot carry: field path -> value
	wire map[string]protoreflect.Value
}{
	{"createrun-dotdot", "flyteidl2.workflow.RunService/CreateRun", `{"runId":{` + fxProject + `,"name":".."},"taskId":` + fxTaskID + `}`, "invalid_argument", "run_id", nil},
	{"createrun-unknown-project", "flyteidl2.workflow.RunService/CreateRun", `{"runId":{"project":"../etc","domain":"development","name":"r"},"taskId":` + fxTaskID + `}`, "invalid_argument", "project", nil},
	// A new project name, then a check that fails: no project may be left behind.
	{"createrun-new-project-bad-offload", "flyteidl2.workflow.RunService/CreateRun", `{"projectId":{"name":"fuzz-new-project","domain":"development"},"taskSpec":` + fxSpec("fuzz.task", "v1") + `,"offloadedInputData":{"uri":"created_at"}}`, "invalid_argument", "offloaded_input_data.uri", nil},
	{"createrun-new-project-bad-base", "flyteidl2.workflow.RunService/CreateRun", `{"projectId":{"name":"fuzz-new-project__0x2f","domain":"development"},"taskSpec":` + fxSpec("fuzz.task", "v1") + `,"inputs":` + fxInputs + `}`, "invalid_argument", "__0x", nil},
	// A duplicate run name with other inputs: refused, and the first run's inputs stay as they were.
	{"createrun-existing-run-other-inputs", "flyteidl2.workflow.RunService/CreateRun", `{"runId":` + fxRun + `,"taskSpec":` + fxSpec("fuzz.task", "v1") + `,"inputs":{"literals":[{"name":"x","value":{"scalar":{"primitive":{"integer":"8"}}}}]}}`, "already_exists", "", nil},
	// Not bad: a literal nested 200 collections deep is a valid input.
	{"createrun-deep-literal", "flyteidl2.workflow.RunService/CreateRun", `{"projectId":` + fxProjID + `,"taskId":` + fxTaskID + `,"inputs":{"literals":[{"name":"x","value":` + nestedLiteral(200) + `}]}}`, "ok", "", nil},
	{"enqueue-outside-storage", "flyteidl2.actions.ActionsService/Enqueue", `{"action":{` + strings.ReplaceAll(fxChild("fuzzchild-out"), blobsPlaceholder+"/fuzz/out", "file:///etc") + `}}`, "invalid_argument", "run_output_base", nil},
	{"upload-location-traversal", "flyteidl2.dataproxy.DataProxyService/CreateUploadLocation", `{` + fxProject + `,"filename":"../../signing.key","filenameRoot":"../.."}`, "invalid_argument", "filename", nil},
	{"upload-location-negative", "flyteidl2.dataproxy.DataProxyService/CreateUploadLocation", `{` + fxProject + `,"filename":"f","filenameRoot":"r","contentLength":"-1","expiresIn":"-5s"}`, "invalid_argument", "must not be negative", nil},
	{"listruns-bad-token", "flyteidl2.workflow.RunService/ListRuns", `{"projectId":` + fxProjID + `,"request":{"limit":4294967295,"token":"%%%not-a-token"}}`, "invalid_argument", "token", nil},
	{"getrun-unicode", "flyteidl2.workflow.RunService/GetRunDetails", `{"runId":{` + fxProject + `,"name":"名前😀"}}`, "invalid_argument", "run_id", nil},
	{"watchactions-unknown-filter", "flyteidl2.workflow.RunService/WatchActions", `{"runId":` + fxRun + `,"filter":[{"function":99,"field":"nope","values":[""]}]}`, "invalid_argument", "nope", nil},
	{"deploy-mismatched-id", "flyteidl2.task.TaskService/DeployTask", `{"taskId":{` + fxProject + `,"name":"other","version":"v1"},"spec":` + fxSpec("fuzz.task", "v1") + `}`, "invalid_argument", "other", nil},
	// Storage under an object (fxFile): nothing there to read, nothing can be written.
	{"createrun-offload-under-object", "flyteidl2.workflow.RunService/CreateRun", `{"projectId":` + fxProjID + `,"taskId":` + fxTaskID + `,"offloadedInputData":{"uri":"` + fxFile + `/x"}}`, "invalid_argument", "not inputs uploaded for project", nil},
	{"uploadinputs-under-object", "flyteidl2.dataproxy.DataProxyService/UploadInputs", `{"projectId":` + fxProjID + `,"taskId":` + fxTaskID + `,"baseDir":"` + fxFile + `"}`, "failed_precondition", "cannot be stored", nil},
	{"actiondata-inputs-under-object", "flyteidl2.workflow.RunService/GetActionData", `{"actionId":{"run":` + fxRun + `,"name":"fuzzchild-odd"}}`, "ok", "", nil},
	{"downloadlink-report-under-object", "flyteidl2.dataproxy.DataProxyService/CreateDownloadLink", `{"artifactType":"ARTIFACT_TYPE_REPORT","actionAttemptId":{"actionId":{"run":` + fxRun + `,"name":"fuzzchild-odd"},"attempt":1}}`, "not_found", "report", nil},
	// Trace times outside years 1..9999 were stored, then broke every read of the run.
	{"enqueue-trace-time-out-of-range", "flyteidl2.actions.ActionsService/Enqueue", `{"action":{"actionId":{"run":` + fxRun + `,"name":"fuzztrace-late"},"parentActionName":"a0",` +
		`"inputUri":"` + blobsPlaceholder + `/fuzz/in","runOutputBase":"` + blobsPlaceholder + `/fuzz/out","trace":{"name":"t","phase":"ACTION_PHASE_SUCCEEDED"}}}`,
		"invalid_argument", "action.trace.start_time", map[string]protoreflect.Value{"action.trace.start_time.seconds": protoreflect.ValueOfInt64(253402300800)}},
	{"enqueue-trace-end-before-year-1", "flyteidl2.actions.ActionsService/Enqueue", `{"action":{"actionId":{"run":` + fxRun + `,"name":"fuzztrace-early"},"parentActionName":"a0",` +
		`"inputUri":"` + blobsPlaceholder + `/fuzz/in","runOutputBase":"` + blobsPlaceholder + `/fuzz/out","trace":{"name":"t","phase":"ACTION_PHASE_FAILED"}}}`,
		"invalid_argument", "action.trace.end_time", map[string]protoreflect.Value{"action.trace.end_time.seconds": protoreflect.ValueOfInt64(-62135596801)}},
	// uint32 attempts past int32: once wrapped to -1 ("the latest attempt").
	{"taillogs-attempt-overflow", "flyteidl2.dataproxy.DataProxyService/TailLogs", `{"actionId":` + fxRoot + `,"attempt":4294967295}`, "invalid_argument", "4294967295", nil},
	{"downloadlink-attempt-overflow", "flyteidl2.dataproxy.DataProxyService/CreateDownloadLink", `{"artifactType":"ARTIFACT_TYPE_REPORT","actionAttemptId":{"actionId":` + fxRoot + `,"attempt":4294967295}}`, "invalid_argument", "4294967295", nil},
}

// nestedLiteral is a Literal nested depth collections deep.
func nestedLiteral(depth int) string {
	return strings.Repeat(`{"collection":{"literals":[`, depth) + `{"scalar":{"primitive":{"integer":"1"}}}` + strings.Repeat(`]}}`, depth)
}

// parseBad is a bad seed's request: its JSON, then its wire values.
func parseBad(p *fuzzProc, js string, wire map[string]protoreflect.Value) (*dynamicpb.Message, error) {
	msg, err := parseRequest(p, js)
	if err != nil {
		return nil, err
	}
	for path, v := range wire {
		var m protoreflect.Message = msg
		names := strings.Split(path, ".")
		for _, name := range names[:len(names)-1] {
			fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
			if fd == nil || fd.Message() == nil {
				return nil, fmt.Errorf("%s: no message field %q in %s", path, name, m.Descriptor().FullName())
			}
			m = m.Mutable(fd).Message()
		}
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(names[len(names)-1]))
		if fd == nil {
			return nil, fmt.Errorf("%s: no field %q in %s", path, names[len(names)-1], m.Descriptor().FullName())
		}
		m.Set(fd, v)
	}
	return msg, nil
}

// parseRequest decodes a JSON request for p.
func parseRequest(p *fuzzProc, js string) (*dynamicpb.Message, error) {
	msg := dynamicpb.NewMessage(p.method.Input())
	if err := protojson.Unmarshal([]byte(js), msg); err != nil {
		return nil, fmt.Errorf("request for %s: %w", p.name, err)
	}
	return msg, nil
}

// wireOf is the deterministic wire form of msg (the corpus stores it).
func wireOf(msg proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		panic(err)
	}
	return b
}

// seedFixture creates the fixture through the procedures themselves.
func (m *fuzzManager) seedFixture(context.Context) error {
	for _, f := range fixture {
		p := m.byName[f.procedure]
		if p == nil {
			return fmt.Errorf("fixture procedure %s is not served", f.procedure)
		}
		msg, err := parseRequest(p, f.request)
		if err != nil {
			return err
		}
		m.expand(msg)
		if out := m.exercise(p, msg); out.code != "ok" || len(out.failures) > 0 {
			return fmt.Errorf("fixture %s: %s %s %v", f.procedure, out.code, out.message, out.failures)
		}
	}
	return nil
}

// expand rewrites every string that starts with blobsPlaceholder to name
// the manager's storage root instead, in msg and everything it holds.
func (m *fuzzManager) expand(msg protoreflect.Message) {
	fix := func(s string) (string, bool) {
		if rest, ok := strings.CutPrefix(s, blobsPlaceholder); ok {
			return m.blobsURL + rest, true
		}
		return s, false
	}
	type set struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var sets []set
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			mp := v.Map()
			var keys []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			for _, k := range keys {
				mv := mp.Get(k)
				if fd.MapValue().Message() != nil {
					m.expand(mv.Message())
				} else if fd.MapValue().Kind() == protoreflect.StringKind {
					if s, ok := fix(mv.String()); ok {
						mp.Set(k, protoreflect.ValueOfString(s))
					}
				}
			}
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if fd.Message() != nil {
					m.expand(l.Get(i).Message())
				} else if fd.Kind() == protoreflect.StringKind {
					if s, ok := fix(l.Get(i).String()); ok {
						l.Set(i, protoreflect.ValueOfString(s))
					}
				}
			}
		case fd.Message() != nil:
			m.expand(v.Message())
		case fd.Kind() == protoreflect.StringKind:
			if s, ok := fix(v.String()); ok {
				sets = append(sets, set{fd, protoreflect.ValueOfString(s)})
			}
		}
		return true
	})
	for _, s := range sets {
		msg.Set(s.fd, s.v)
	}
}

// corpusFiles is the committed seed corpus (testdata/fuzz/<Target>/<name>)
// as it must be: for FuzzProcedureWire every seed request and bad seed in
// wire form; for FuzzProcedureGenerated every procedure with no choices
// (its valid request) and with a few fixed ones. Placeholders stay as
// they are (the targets expand them).
func corpusFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	entry := func(procedure string, data []byte) []byte {
		return fmt.Appendf(nil, "go test fuzz v1\nstring(%q)\n[]byte(%q)\n", procedure, data)
	}
	proc := func(name string) *fuzzProc {
		service, method, _ := strings.Cut(name, "/")
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
		if err != nil {
			tb.Fatalf("seed for %s: %v", name, err)
		}
		md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
		if md == nil {
			tb.Fatalf("seed for %s: no such method", name)
		}
		return &fuzzProc{name: name, method: md}
	}
	slug := strings.NewReplacer(".", "_", "/", "-").Replace
	for name, s := range seeds {
		msg, err := parseRequest(proc(name), s.request)
		if err != nil {
			tb.Fatal(err)
		}
		out["FuzzProcedureWire/seed-"+slug(name)] = entry(name, wireOf(msg))
		out["FuzzProcedureGenerated/seed-"+slug(name)] = entry(name, nil)
		if s.want != "unimplemented" {
			for i := range 3 {
				sum := sha256.Sum256(fmt.Appendf(nil, "%s %d", name, i))
				out[fmt.Sprintf("FuzzProcedureGenerated/gen%d-%s", i, slug(name))] = entry(name, sum[:4+4*i])
			}
		}
	}
	for _, b := range badSeeds {
		msg, err := parseBad(proc(b.procedure), b.request, b.wire)
		if err != nil {
			tb.Fatal(err)
		}
		out["FuzzProcedureWire/bad-"+b.name] = entry(b.procedure, wireOf(msg))
	}
	return out
}

// TestFuzzCorpus checks that the committed corpus is the one corpusFiles
// describes; FM_FUZZ_WRITE_CORPUS=1 rewrites it.
func TestFuzzCorpus(t *testing.T) {
	want := corpusFiles(t)
	dir := filepath.Join("testdata", "fuzz")
	if os.Getenv("FM_FUZZ_WRITE_CORPUS") == "1" {
		for _, target := range []string{"FuzzProcedureWire", "FuzzProcedureGenerated"} {
			if err := os.RemoveAll(filepath.Join(dir, target)); err != nil {
				t.Fatal(err)
			}
		}
		for name, data := range want {
			path := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("corpus file %s is missing or stale (%v); run FM_FUZZ_WRITE_CORPUS=1 go test ./manager -run TestFuzzCorpus", name, err)
		}
	}
}
