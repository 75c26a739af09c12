package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Codes as the probe prints them (connect.Code.String()).
const (
	codeOK              = "ok"
	codeInvalidArgument = "invalid_argument"
	codeNotFound        = "not_found"
	codeUnimplemented   = "unimplemented"
)

// unbuiltServices answer Unimplemented for every procedure: later work
// items build them (DESIGN.md §9); they are mounted so that no procedure of
// the contract answers 404.
var unbuiltServices = []string{
	"flyteidl2.workflow.InternalRunService",
}

// emptyRequestCode is, for every procedure of the built services, what an
// empty request must get: InvalidArgument where the request needs an
// identifier or other input, OK where an empty request means "everything"
// or "defaults", Unimplemented only for what is not built yet.
var emptyRequestCode = map[string]string{
	"/flyteidl2.actions.ActionsService/Enqueue":         codeInvalidArgument,
	"/flyteidl2.actions.ActionsService/WatchForUpdates": codeInvalidArgument,
	"/flyteidl2.actions.ActionsService/Abort":           codeInvalidArgument,
	"/flyteidl2.actions.ActionsService/Update":          codeUnimplemented,
	"/flyteidl2.actions.ActionsService/Signal":          codeInvalidArgument,

	// Without authentication configured there is no authorization server
	// to describe: the SDK then connects without credentials.
	"/flyteidl2.auth.AuthMetadataService/GetOAuth2Metadata":     codeUnimplemented,
	"/flyteidl2.auth.AuthMetadataService/GetPublicClientConfig": codeUnimplemented,
	"/flyteidl2.auth.IdentityService/UserInfo":                  codeOK,

	"/flyteidl2.cluster.ClusterService/SelectCluster": codeOK,

	// Apps: every procedure names an app or a cluster but List, whose
	// empty request lists the apps of the local org.
	"/flyteidl2.app.AppService/Create":       codeInvalidArgument,
	"/flyteidl2.app.AppService/Get":          codeInvalidArgument,
	"/flyteidl2.app.AppService/Update":       codeInvalidArgument,
	"/flyteidl2.app.AppService/UpdateStatus": codeInvalidArgument,
	"/flyteidl2.app.AppService/Delete":       codeInvalidArgument,
	"/flyteidl2.app.AppService/List":         codeOK,
	"/flyteidl2.app.AppService/Watch":        codeInvalidArgument,
	"/flyteidl2.app.AppService/Lease":        codeInvalidArgument,
	"/flyteidl2.app.AppLogsService/TailLogs": codeInvalidArgument,

	"/flyteidl2.imagebuilder.ImageService/GetImage": codeInvalidArgument,

	"/flyteidl2.cacheservice.CacheService/Get":                       codeInvalidArgument,
	"/flyteidl2.cacheservice.CacheService/Put":                       codeInvalidArgument,
	"/flyteidl2.cacheservice.CacheService/Delete":                    codeInvalidArgument,
	"/flyteidl2.cacheservice.CacheService/GetOrExtendReservation":    codeInvalidArgument,
	"/flyteidl2.cacheservice.CacheService/ReleaseReservation":        codeInvalidArgument,
	"/flyteidl2.cacheservice.v2.CacheService/Get":                    codeInvalidArgument,
	"/flyteidl2.cacheservice.v2.CacheService/Put":                    codeInvalidArgument,
	"/flyteidl2.cacheservice.v2.CacheService/Delete":                 codeInvalidArgument,
	"/flyteidl2.cacheservice.v2.CacheService/GetOrExtendReservation": codeInvalidArgument,
	"/flyteidl2.cacheservice.v2.CacheService/ReleaseReservation":     codeInvalidArgument,

	"/flyteidl2.dataproxy.DataProxyService/CreateUploadLocation": codeInvalidArgument,
	"/flyteidl2.dataproxy.DataProxyService/UploadInputs":         codeInvalidArgument,
	"/flyteidl2.dataproxy.DataProxyService/CreateDownloadLink":   codeInvalidArgument,
	"/flyteidl2.dataproxy.DataProxyService/GetActionData":        codeInvalidArgument,
	"/flyteidl2.dataproxy.DataProxyService/TailLogs":             codeInvalidArgument,

	"/flyteidl2.project.ProjectService/CreateProject": codeInvalidArgument,
	"/flyteidl2.project.ProjectService/UpdateProject": codeInvalidArgument,
	"/flyteidl2.project.ProjectService/GetProject":    codeInvalidArgument,
	"/flyteidl2.project.ProjectService/ListProjects":  codeOK,

	"/flyteidl2.secret.SecretService/CreateSecret": codeInvalidArgument,
	"/flyteidl2.secret.SecretService/UpdateSecret": codeInvalidArgument,
	"/flyteidl2.secret.SecretService/GetSecret":    codeInvalidArgument,
	"/flyteidl2.secret.SecretService/DeleteSecret": codeInvalidArgument,
	"/flyteidl2.secret.SecretService/ListSecrets":  codeOK,

	"/flyteidl2.trigger.TriggerService/DeployTrigger":             codeInvalidArgument,
	"/flyteidl2.trigger.TriggerService/GetTriggerDetails":         codeInvalidArgument,
	"/flyteidl2.trigger.TriggerService/GetTriggerRevisionDetails": codeInvalidArgument,
	"/flyteidl2.trigger.TriggerService/GetTriggerRevisionHistory": codeInvalidArgument,
	"/flyteidl2.trigger.TriggerService/ListTriggers":              codeInvalidArgument,
	"/flyteidl2.trigger.TriggerService/UpdateTriggers":            codeInvalidArgument,
	"/flyteidl2.trigger.TriggerService/DeleteTriggers":            codeInvalidArgument,

	"/flyteidl2.task.TaskService/DeployTask":     codeInvalidArgument,
	"/flyteidl2.task.TaskService/GetTaskDetails": codeInvalidArgument,
	"/flyteidl2.task.TaskService/ListTasks":      codeOK,
	"/flyteidl2.task.TaskService/ListVersions":   codeInvalidArgument,

	"/flyteidl2.workflow.EventsProxyService/Record": codeInvalidArgument,

	"/flyteidl2.workflow.QueueService/EnqueueAction":     codeInvalidArgument,
	"/flyteidl2.workflow.QueueService/AbortQueuedRun":    codeInvalidArgument,
	"/flyteidl2.workflow.QueueService/AbortQueuedAction": codeInvalidArgument,

	"/flyteidl2.workflow.RunService/CreateRun":           codeInvalidArgument,
	"/flyteidl2.workflow.RunService/AbortRun":            codeInvalidArgument,
	"/flyteidl2.workflow.RunService/GetRunDetails":       codeInvalidArgument,
	"/flyteidl2.workflow.RunService/WatchRunDetails":     codeInvalidArgument,
	"/flyteidl2.workflow.RunService/GetActionDetails":    codeInvalidArgument,
	"/flyteidl2.workflow.RunService/WatchActionDetails":  codeInvalidArgument,
	"/flyteidl2.workflow.RunService/GetActionData":       codeInvalidArgument,
	"/flyteidl2.workflow.RunService/GetActionDataURIs":   codeInvalidArgument,
	"/flyteidl2.workflow.RunService/ListRuns":            codeOK,
	"/flyteidl2.workflow.RunService/WatchRuns":           codeInvalidArgument,
	"/flyteidl2.workflow.RunService/ListActions":         codeInvalidArgument,
	"/flyteidl2.workflow.RunService/WatchActions":        codeInvalidArgument,
	"/flyteidl2.workflow.RunService/AbortAction":         codeInvalidArgument,
	"/flyteidl2.workflow.RunService/WatchClusterEvents":  codeInvalidArgument,
	"/flyteidl2.workflow.RunService/SignalEvent":         codeInvalidArgument,
	"/flyteidl2.workflow.RunService/WatchGroups":         codeInvalidArgument,
	"/flyteidl2.workflow.RunService/GetActionLogContext": codeInvalidArgument,

	// An empty spec or form is refused; no literals or variables is an empty answer.
	"/flyteidl2.workflow.TranslatorService/TaskSpecToLaunchFormJson": codeInvalidArgument,
	"/flyteidl2.workflow.TranslatorService/LaunchFormJsonToLiterals": codeInvalidArgument,
	"/flyteidl2.workflow.TranslatorService/LiteralsToLaunchFormJson": codeOK,
	"/flyteidl2.workflow.TranslatorService/JsonValuesToLiterals":     codeOK,

	"/flyteidl2.workflow.StateService/Put":   codeUnimplemented,
	"/flyteidl2.workflow.StateService/Get":   codeUnimplemented,
	"/flyteidl2.workflow.StateService/Watch": codeInvalidArgument,
}

// probeCase is one request of testdata/probe_services.py's cases file:
// the request as protobuf JSON, and the code it must get.
type probeCase struct {
	Name      string         `json:"name"`
	Procedure string         `json:"procedure"`
	Request   map[string]any `json:"request"`
	want      string
}

// probeCases are well-formed requests for things that do not exist
// (NotFound) and requests with a malformed field (InvalidArgument).
func probeCases() []probeCase {
	run := map[string]any{"project": testProject, "domain": testDomain, "name": "e2emissing"}
	action := map[string]any{"run": run, "name": "a0"}
	var cases []probeCase
	add := func(name, want string, request map[string]any, procedures ...string) {
		for _, p := range procedures {
			cases = append(cases, probeCase{Name: name, Procedure: p, Request: request, want: want})
		}
	}
	add("missing run", codeNotFound, map[string]any{"runId": run},
		"/flyteidl2.workflow.RunService/GetRunDetails",
		"/flyteidl2.workflow.RunService/WatchRunDetails",
		"/flyteidl2.workflow.RunService/AbortRun",
		"/flyteidl2.workflow.RunService/ListActions",
		"/flyteidl2.workflow.RunService/WatchActions",
		"/flyteidl2.workflow.QueueService/AbortQueuedRun")
	add("missing action", codeNotFound, map[string]any{"actionId": action},
		"/flyteidl2.workflow.RunService/GetActionDetails",
		"/flyteidl2.workflow.RunService/WatchActionDetails",
		"/flyteidl2.workflow.RunService/GetActionData",
		"/flyteidl2.workflow.RunService/GetActionDataURIs",
		"/flyteidl2.workflow.RunService/AbortAction",
		"/flyteidl2.workflow.QueueService/AbortQueuedAction",
		"/flyteidl2.actions.ActionsService/Abort",
		"/flyteidl2.dataproxy.DataProxyService/GetActionData",
		"/flyteidl2.dataproxy.DataProxyService/TailLogs")
	add("missing condition", codeNotFound, map[string]any{"actionId": action, "payload": map[string]any{"boolValue": true}},
		"/flyteidl2.workflow.RunService/SignalEvent")
	add("missing condition", codeNotFound, map[string]any{"actionId": action, "value": map[string]any{
		"scalar": map[string]any{"primitive": map[string]any{"boolean": true}}}},
		"/flyteidl2.actions.ActionsService/Signal")
	add("signal without a value", codeInvalidArgument, map[string]any{"actionId": action},
		"/flyteidl2.workflow.RunService/SignalEvent")
	add("missing parent action", codeNotFound, map[string]any{"parentActionId": action},
		"/flyteidl2.actions.ActionsService/WatchForUpdates",
		"/flyteidl2.workflow.StateService/Watch")
	add("missing task", codeNotFound, map[string]any{"taskId": map[string]any{
		"project": testProject, "domain": testDomain, "name": "e2e.missing", "version": "v1",
	}}, "/flyteidl2.task.TaskService/GetTaskDetails")
	add("missing image", codeNotFound, map[string]any{"id": map[string]any{"name": "e2e-missing:v1"}},
		"/flyteidl2.imagebuilder.ImageService/GetImage")
	add("missing project", codeNotFound, map[string]any{"id": "e2e-missing"},
		"/flyteidl2.project.ProjectService/GetProject")
	add("missing cache key", codeNotFound, map[string]any{"identifier": map[string]any{"project": testProject, "domain": testDomain},
		"baseRequest": map[string]any{"key": "e2e-missing"}},
		"/flyteidl2.cacheservice.v2.CacheService/Get", "/flyteidl2.cacheservice.v2.CacheService/Delete")
	add("missing cache key", codeNotFound, map[string]any{"key": "e2e-missing"},
		"/flyteidl2.cacheservice.CacheService/Get", "/flyteidl2.cacheservice.CacheService/Delete")
	add("malformed run name", codeInvalidArgument, map[string]any{"runId": map[string]any{
		"project": testProject, "domain": testDomain, "name": "Not A Name!",
	}}, "/flyteidl2.workflow.RunService/GetRunDetails", "/flyteidl2.workflow.RunService/AbortRun")
	add("missing action", codeNotFound, map[string]any{"id": action}, "/flyteidl2.workflow.RunService/WatchClusterEvents")
	add("malformed action name", codeInvalidArgument, map[string]any{"actionId": map[string]any{"run": run, "name": "../a0"}},
		"/flyteidl2.workflow.RunService/GetActionDetails", "/flyteidl2.actions.ActionsService/Abort")
	add("missing secret", codeNotFound, map[string]any{"id": map[string]any{"name": "e2e-missing"}},
		"/flyteidl2.secret.SecretService/GetSecret", "/flyteidl2.secret.SecretService/DeleteSecret")
	add("missing secret", codeNotFound, map[string]any{"id": map[string]any{"name": "e2e-missing"}, "secretSpec": map[string]any{"stringValue": "v"}},
		"/flyteidl2.secret.SecretService/UpdateSecret")
	add("secret project without domain", codeInvalidArgument, map[string]any{"id": map[string]any{"name": "s", "project": testProject}, "secretSpec": map[string]any{"stringValue": "v"}},
		"/flyteidl2.secret.SecretService/CreateSecret")
	return cases
}

// mountedServices matches the manager's debug log line that lists the
// services its server mounted (server.Server.Services).
var mountedServices = regexp.MustCompile(`msg="mounted services" services=(\S+)`)

// TestOfficialClientsReachEveryProcedure calls every procedure of every
// service the manager's server says it mounted, with the official Python
// clients: an empty request, then the missing-thing and malformed cases.
// Each must get exactly the code listed for it, from its handler (counted in
// /metrics), never a routing miss or a protocol failure.
func TestOfficialClientsReachEveryProcedure(t *testing.T) {
	m := startManager(t, backends[0].dsn(t), "FLYTE_MANAGER_LOG_LEVEL=debug")
	match := mountedServices.FindStringSubmatch(m.output.String())
	if match == nil {
		t.Fatalf("the manager did not log the services it mounted:\n%s", m.output)
	}
	served := strings.Split(match[1], ",")

	cases := probeCases()
	raw, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	casesFile := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(casesFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := python(t, ctx, nil, "probe_services.py", append([]string{m.URL, casesFile}, served...)...)

	want := map[[2]string]string{} // (case, procedure) → code
	for p, code := range emptyRequestCode {
		want[[2]string{"", p}] = code
	}
	for _, c := range cases {
		want[[2]string{c.Name, c.Procedure}] = c.want
	}
	metrics := m.metrics()
	probed := map[[2]string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct{ Case, Procedure, Code, Message string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("probe output %q: %v", line, err)
		}
		key := [2]string{r.Case, r.Procedure}
		probed[key] = true
		code, ok := want[key]
		if !ok && r.Case == "" && slices.Contains(unbuiltServices, serviceOf(r.Procedure)) {
			code, ok = codeUnimplemented, true
		}
		label := r.Procedure + " (empty request)"
		if r.Case != "" {
			label = fmt.Sprintf("%s (%s)", r.Procedure, r.Case)
		}
		switch {
		case !ok:
			t.Errorf("%s answered %s %q: the test has no expectation for this procedure; add one", label, r.Code, r.Message)
		case r.Code != code:
			t.Errorf("%s answered %s %q, want %s", label, r.Code, r.Message, code)
		}
		if !strings.Contains(metrics, fmt.Sprintf(`procedure=%q`, r.Procedure)) {
			t.Errorf("%s answered %s but never reached a handler (not in /metrics)", label, r.Code)
		}
	}
	for key := range want {
		if !probed[key] {
			t.Errorf("%s (case %q) was never probed: the server does not serve %s", key[1], key[0], serviceOf(key[1]))
		}
	}
	for _, svc := range unbuiltServices {
		if !slices.Contains(served, svc) {
			t.Errorf("service %s is not mounted: its procedures must answer Unimplemented, not 404", svc)
		}
	}
	t.Logf("%d services served; %d calls answered as expected", len(served), len(probed))
}

// serviceOf is "pkg.Service" of "/pkg.Service/Method".
func serviceOf(procedure string) string {
	service, _, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	return service
}
