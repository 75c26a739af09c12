package runs_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/auth/authconnect"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/gen/go/flyteidl2/task/taskconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
	"fmgr.dev/runs"
)

// TestMain is the runs package's only TestMain: every test binary of the
// package gets a real PostgreSQL through pgtest.
func TestMain(m *testing.M) { pgtest.Main(m) }

// harness serves the run, task, project, identity and auth-metadata
// services through the manager's real server (interceptors, error mapping,
// gzip pre-decompression) on an httptest listener, with generated clients.
// The run state has its change hub running and no executor: tests move
// actions through their phases with the store.
type harness struct {
	st       *store.Store
	state    *runstate.Service
	projects *runs.ProjectService
	srv      *httptest.Server

	runs       workflowconnect.RunServiceClient
	translator workflowconnect.TranslatorServiceClient

	tasks    taskconnect.TaskServiceClient
	project  projectconnect.ProjectServiceClient
	identity authconnect.IdentityServiceClient
	authMeta authconnect.AuthMetadataServiceClient
}

// eachDatabase runs fn on a migrated SQLite file and on a migrated
// PostgreSQL database: the services must behave the same on both.
func eachDatabase(t *testing.T, cfg config.Projects, fn func(t *testing.T, h *harness)) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) { fn(t, newHarness(t, dsn, cfg)) })
}

// newHarness serves orgs kept apart: the tests of scopes name orgs of
// their own (newHarnessOrgs serves other org settings).
func newHarness(t *testing.T, dsn string, cfg config.Projects) *harness {
	t.Helper()
	return newHarnessOrgs(t, dsn, cfg, config.Orgs{Default: config.DefaultOrg, Separate: true})
}

func newHarnessOrgs(t *testing.T, dsn string, cfg config.Projects, orgs config.Orgs) *harness {
	t.Helper()
	return newHarnessServer(t, dsn, cfg, func(s *config.Server) { s.Orgs = orgs })
}

// newHarnessServer is a harness whose server configuration tune adjusts.
func newHarnessServer(t *testing.T, dsn string, cfg config.Projects, tune func(*config.Server)) *harness {
	t.Helper()
	state, _, env := statetest.New(t, dbtest.Migrated(t, dsn), statetest.Options{Projects: &cfg}, runstate.NoExecutor)
	st, log := env.Store, env.Log

	srvCfg := config.Default().Server
	srvCfg.Port = 0
	tune(&srvCfg)
	s := server.New(srvCfg, log)
	opts := s.HandlerOptions()
	h := &harness{st: st, state: state, projects: runs.NewProjectService(st, cfg, log)}
	handlers := runs.NewIdentityServices(config.Auth{}).Handlers(opts...)
	for _, mount := range []func(...connect.HandlerOption) (string, http.Handler){
		runs.NewTaskService(st, state, cfg, log).Handler,
		runs.NewRunService(h.state).Handler,
		runs.NewTranslatorService(h.state).Handler,
		h.projects.Handler,
	} {
		path, handler := mount(opts...)
		handlers[path] = handler
	}
	for path, handler := range handlers {
		if err := s.Mount(server.Service{Path: path, Handler: handler}); err != nil {
			t.Fatal(err)
		}
	}
	h.srv = httptest.NewServer(s.Handler())
	t.Cleanup(h.srv.Close)

	c := h.srv.Client()
	h.runs = workflowconnect.NewRunServiceClient(c, h.srv.URL)
	h.translator = workflowconnect.NewTranslatorServiceClient(c, h.srv.URL)
	h.tasks = taskconnect.NewTaskServiceClient(c, h.srv.URL)
	h.project = projectconnect.NewProjectServiceClient(c, h.srv.URL)
	h.identity = authconnect.NewIdentityServiceClient(c, h.srv.URL)
	h.authMeta = authconnect.NewAuthMetadataServiceClient(c, h.srv.URL)
	return h
}

// wantCode is rpctest.WantCode.
var wantCode = rpctest.WantCode

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
