package trigger

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/trigger"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
)

// serve mounts the service on a server with the manager's interceptors
// (error codes, orgs) and a deployed task env.report v1 in p/development.
func serve(t *testing.T, dsn string) (rpctest.Browser, *store.Store) {
	t.Helper()
	st := store.New(dbtest.Migrated(t, dsn))
	deployTask(t, st)
	cfg := config.Default().Server
	cfg.Port = 0
	log := slog.New(slog.DiscardHandler)
	srv := server.New(cfg, log)
	if err := Setup(srv, NewService(st, time.Minute, log)); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return rpctest.Browser{T: t, Base: ts.URL, Client: ts.Client()}, st
}

// deployTask deploys env.report v1 in p/development, with one input, day.
func deployTask(t *testing.T, st *store.Store) {
	t.Helper()
	spec := &task.TaskSpec{TaskTemplate: &core.TaskTemplate{Interface: &core.TypedInterface{
		Inputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "day", Value: &core.Variable{}}}},
	}}}
	raw, err := marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Tasks.Deploy(context.Background(), store.Task{
		TaskID:     store.TaskID{Project: "p", Domain: "development", Name: "env.report", Version: "v1"},
		SpecDigest: store.SpecDigest(raw),
	}, raw); err != nil {
		t.Fatal(err)
	}
}

const (
	deployPath = "flyteidl2.trigger.TriggerService/DeployTrigger"
	listPath   = "flyteidl2.trigger.TriggerService/ListTriggers"
	updatePath = "flyteidl2.trigger.TriggerService/UpdateTriggers"
	name       = `{"org":"localhost","project":"p","domain":"development","taskName":"env.report","name":"hourly"}`
)

func deployBody(revision, cron string) string {
	rev := ""
	if revision != "" {
		rev = `"revision":"` + revision + `",`
	}
	return `{"name":` + name + `,` + rev + `"spec":{"active":true,"taskVersion":"v1"},` +
		`"automationSpec":{"type":"TYPE_SCHEDULE","schedule":{"cron":{"expression":"` + cron + `","timezone":"Europe/Paris"}}}}`
}

// The official console's requests, as Connect JSON: its create wizard, its
// list with filters and sort, its active toggle, and its retry of a deploy
// on FAILED_PRECONDITION "optimistic lock failure".
func TestConsoleRequests(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		b, _ := serve(t, dsn)
		deployed := &trigger.DeployTriggerResponse{}
		if code, msg := b.CallJSON(deployPath, []byte(deployBody("", "0 * * * *")), deployed); code != "" {
			t.Fatalf("DeployTrigger: %s %s", code, msg)
		}
		if rev := deployed.GetTrigger().GetId().GetRevision(); rev != 1 {
			t.Fatalf("first deploy: revision %d", rev)
		}
		const scope = `"projectId":{"organization":"localhost","domain":"development","name":"p"}`
		for _, body := range []string{
			`{"request":{"sortByFields":[{"key":"active"}]},` + scope + `}`,
			`{"request":{"limit":20,"filters":[{"function":"CONTAINS_CASE_INSENSITIVE","field":"name","values":["HOUR"]},` +
				`{"function":"EQUAL","field":"task_name","values":["env.report"]},{"function":"EQUAL","field":"active","values":["true"]},` +
				`{"function":"VALUE_IN","field":"automation_type","values":["TYPE_SCHEDULE"]}]},` + scope + `}`,
		} {
			listed := &trigger.ListTriggersResponse{}
			if code, msg := b.CallJSON(listPath, []byte(body), listed); code != "" {
				t.Fatalf("ListTriggers %s: %s %s", body, code, msg)
			}
			if ts := listed.GetTriggers(); len(ts) != 1 || ts[0].GetId().GetName().GetName() != "hourly" || !ts[0].GetActive() ||
				ts[0].GetAutomationSpec().GetSchedule().GetCron().GetTimezone() != "Europe/Paris" {
				t.Fatalf("ListTriggers %s: %v", body, ts)
			}
		}
		none := &trigger.ListTriggersResponse{}
		if code, msg := b.CallJSON(listPath, []byte(`{"request":{"filters":[{"function":"EQUAL","field":"active","values":["false"]}]},`+scope+`}`), none); code != "" || len(none.GetTriggers()) != 0 {
			t.Fatalf("inactive triggers: %s %s %v", code, msg, none.GetTriggers())
		}

		// The toggle bumps the revision: a deploy over revision 1 is stale.
		if code, msg := b.CallJSON(updatePath, []byte(`{"names":[`+name+`],"active":false}`), &trigger.UpdateTriggersResponse{}); code != "" {
			t.Fatalf("UpdateTriggers: %s %s", code, msg)
		}
		code, msg := b.CallJSON(deployPath, []byte(deployBody("1", "30 * * * *")), &trigger.DeployTriggerResponse{})
		if code != "failed_precondition" || !strings.Contains(msg, "optimistic lock failure") {
			t.Fatalf("a deploy over a stale revision: %s %q, want failed_precondition with \"optimistic lock failure\"", code, msg)
		}
		// The console reads it again and retries with the current revision.
		if code, msg := b.CallJSON(deployPath, []byte(deployBody("2", "30 * * * *")), deployed); code != "" {
			t.Fatalf("the retry: %s %s", code, msg)
		}
		if rev := deployed.GetTrigger().GetId().GetRevision(); rev != 3 || deployed.GetTrigger().GetAutomationSpec().GetSchedule().GetCron().GetExpression() != "30 * * * *" {
			t.Fatalf("after the retry: %v", deployed.GetTrigger())
		}

		// Refusals, with the code a client branches on.
		for _, c := range []struct{ body, code, fragment string }{
			{deployBody("", "61 * * * *"), "invalid_argument", "cron"},
			{strings.Replace(deployBody("", "0 * * * *"), `"Europe/Paris"`, `"Mars/Olympus"`, 1), "invalid_argument", "Mars/Olympus"},
			{strings.Replace(deployBody("", "0 * * * *"), `"taskVersion":"v1"`, `"taskVersion":"v9"`, 1), "not_found", "v9"},
			{`{"name":` + name + `}`, "invalid_argument", "spec"},
			{strings.Replace(deployBody("", "0 * * * *"), `"timezone":"Europe/Paris"}`, `"timezone":"Europe/Paris"},"kickoffTimeInputArg":"when"`, 1), "invalid_argument", "when"},
		} {
			code, msg := b.CallJSON(deployPath, []byte(c.body), &trigger.DeployTriggerResponse{})
			if code != c.code || !strings.Contains(msg, c.fragment) {
				t.Errorf("DeployTrigger %s: %s %q, want %s naming %q", c.body, code, msg, c.code, c.fragment)
			}
		}
		if code, msg := b.CallJSON(updatePath, []byte(`{"names":[`+name+`],"active":false}`), &trigger.UpdateTriggersResponse{}); code != "" {
			t.Fatalf("UpdateTriggers: %s %s", code, msg)
		}
		missing := strings.Replace(name, "hourly", "nope", 1)
		if code, _ := b.CallJSON(updatePath, []byte(`{"names":[`+name+`,`+missing+`],"active":true}`), &trigger.UpdateTriggersResponse{}); code != "not_found" {
			t.Errorf("UpdateTriggers naming a missing trigger: %s, want not_found", code)
		}
		details := &trigger.GetTriggerDetailsResponse{}
		if code, msg := b.CallJSON("flyteidl2.trigger.TriggerService/GetTriggerDetails", []byte(`{"name":`+name+`}`), details); code != "" {
			t.Fatalf("GetTriggerDetails: %s %s", code, msg)
		}
		if details.GetTrigger().GetSpec().GetActive() {
			t.Error("a refused update activated a trigger")
		}
	})
}
