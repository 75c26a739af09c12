package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// servedServices is every service the manager must route (DESIGN.md §2).
var servedServices = []string{
	"flyteidl2.workflow.RunService",
	"flyteidl2.workflow.QueueService",
	"flyteidl2.workflow.StateService",
	"flyteidl2.workflow.InternalRunService",
	"flyteidl2.workflow.TranslatorService",
	"flyteidl2.task.TaskService",
	"flyteidl2.actions.ActionsService",
	"flyteidl2.dataproxy.DataProxyService",
	"flyteidl2.cluster.ClusterService",
	"flyteidl2.cacheservice.CacheService",
	"flyteidl2.cacheservice.v2.CacheService",
	"flyteidl2.secret.SecretService",
	"flyteidl2.app.AppService",
	"flyteidl2.app.AppLogsService",
	"flyteidl2.project.ProjectService",
	"flyteidl2.trigger.TriggerService",
	"flyteidl2.auth.IdentityService",
	"flyteidl2.auth.AuthMetadataService",
}

// TestOfficialClientsReachEveryProcedure calls every method of every served
// service with the official Python clients. Each call must reach a handler:
// a real answer or a Connect error from the handler, never a routing miss
// (which the server's metrics would not count) or a protocol failure.
func TestOfficialClientsReachEveryProcedure(t *testing.T) {
	m := startManager(t, backends[0].dsn(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := python(t, ctx, nil, "probe_services.py", append([]string{m.URL}, servedServices...)...)

	metrics := m.metrics()
	calls := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct{ Procedure, Code, Message string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("probe output %q: %v", line, err)
		}
		calls++
		// Protocol failures surface in the client as unknown/internal with
		// transport text; handlers here never answer those for an empty request.
		if r.Code == "unknown" || r.Code == "internal" || r.Code == "unavailable" {
			t.Errorf("%s: protocol-level failure %s: %s", r.Procedure, r.Code, r.Message)
		}
		if !strings.Contains(metrics, fmt.Sprintf(`procedure=%q`, r.Procedure)) {
			t.Errorf("%s: answered %s but never reached a handler (not in /metrics)", r.Procedure, r.Code)
		}
	}
	if calls < 80 {
		t.Fatalf("probe made only %d calls; expected every method of %d services", calls, len(servedServices))
	}
	t.Logf("%d procedures reached their handlers", calls)
}
