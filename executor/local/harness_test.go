package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"gorm.io/gorm"

	"fmgr.dev/executor/local/process"
	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness is one manager's worth of run state over a real database and a
// file blob store, with a work dir and a bin dir holding a fake `a0`.
type harness struct {
	t        *testing.T
	ctx      context.Context
	db       *gorm.DB
	st       *store.Store
	blobs    *blob.Store
	hub      *runstate.Hub
	state    *runstate.Service // the run state of the driver started last
	log      *slog.Logger
	workDir  string
	binDir   string
	fixtures string // outputs.pb, recoverable.pb, system.pb, fatal.pb
	shared   string // a directory scripts use to talk to the test
}

// eachDB runs fn on SQLite and on PostgreSQL.
func eachDB(t *testing.T, fn func(t *testing.T, h *harness)) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) { fn(t, newHarness(t, dsn)) })
}

func newHarness(t *testing.T, dsn string) *harness {
	t.Helper()
	logs := &testLog{t: t}
	t.Cleanup(logs.close) // registered first: runs last
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	root := testkit.TaskDir(t) // the tasks' user passes through
	g := dbtest.Migrated(t, dsn)
	state, _, env := statetest.New(t, g, statetest.Options{Log: log, BlobDir: filepath.Join(root, "blobs")}, runstate.NoExecutor)

	h := &harness{
		t: t, ctx: ctx, db: g, st: env.Store, blobs: env.Blobs, hub: env.Hub, log: log, state: state,
		workDir:  filepath.Join(root, "work"),
		binDir:   filepath.Join(root, "bin"),
		fixtures: filepath.Join(root, "fixtures"),
		shared:   filepath.Join(root, "shared"),
	}
	for _, dir := range []string{h.binDir, h.fixtures, h.shared} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Scripts, whatever user they run as, leave their notes here.
	if err := os.Chmod(h.shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	// The fake runtime: `a0 SCRIPT ARGS...` runs SCRIPT with sh, ARGS as $1...
	writeFile(t, filepath.Join(h.binDir, "a0"), "#!/bin/sh\nscript=\"$1\"; shift\nexec /bin/sh -c \"$script\" a0 \"$@\"\n", 0o755)
	writeProto(t, filepath.Join(h.fixtures, "outputs.pb"), &task.Outputs{Literals: []*task.NamedLiteral{{
		Name:  "o0",
		Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 7}}}}}},
	}}})
	writeProto(t, filepath.Join(h.fixtures, "recoverable.pb"), &core.ErrorDocument{Error: &core.ContainerError{
		Code: "ValueError", Message: "try again", Kind: core.ContainerError_RECOVERABLE, Origin: core.ExecutionError_USER,
	}})
	writeProto(t, filepath.Join(h.fixtures, "system.pb"), &core.ErrorDocument{Error: &core.ContainerError{
		Code: "RuntimeSystemError", Message: "the task raised a system error", Kind: core.ContainerError_RECOVERABLE, Origin: core.ExecutionError_SYSTEM,
	}})
	writeProto(t, filepath.Join(h.fixtures, "fatal.pb"), &core.ErrorDocument{Error: &core.ContainerError{
		Code: "NonRecoverableError", Message: "cannot recover from this", Kind: core.ContainerError_NON_RECOVERABLE, Origin: core.ExecutionError_USER,
	}})
	return h
}

// driver builds, connects and starts a driver with test-sized timings.
func (h *harness) driver(tune ...func(*config.LocalExecutor)) *Driver {
	h.t.Helper()
	return h.driverWith(nil, tune...)
}

// driverWith is driver with adjust applied to the driver's own tunables
// before it starts.
func (h *harness) driverWith(adjust func(*Driver), tune ...func(*config.LocalExecutor)) *Driver {
	h.t.Helper()
	cfg := config.Executor{Type: config.ExecutorLocal, Local: config.LocalExecutor{
		Python: h.binDir, WorkDir: h.workDir, MaxParallelism: 4, SystemRetries: 2, WarmStart: true, // as by default
	}}
	for _, f := range tune {
		f(&cfg.Local)
	}
	// Each driver gets its own run state over the harness's store, as a
	// restarted manager would; h.state follows the driver started last.
	var d *Driver
	h.state, d = newState(h, func(state *runstate.Service) *Driver {
		return New(state, cfg, func() string { return "localhost:1" }, h.log)
	})
	d.killGrace = 500 * time.Millisecond
	d.resyncInterval = 300 * time.Millisecond
	d.systemBackoff.Base = 0
	if adjust != nil {
		adjust(d)
	}
	if err := d.Start(h.ctx); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Stop(ctx)
	})
	return d
}

// taskOpts shape the TaskSpec of a test task.
type taskOpts struct {
	retries  uint32
	timeout  time.Duration
	deadline time.Duration
	queued   time.Duration
	env      map[string]string
	taskType string
	runEnv   map[string]string
	limit    uint32
	// cacheVersion makes the task discoverable (cache=) with that version;
	// serialize makes it cache_serializable.
	cacheVersion string
	serialize    bool
	secrets      []*core.Secret
	// resources and extended are the container's resources and the
	// task's extended resources (a GPU accelerator).
	resources *core.Resources
	extended  *core.ExtendedResources
}

// spec is a TaskSpec whose container runs script through the fake a0 with
// the templates as positional arguments: $1 input, $2 output prefix, $3 raw
// data prefix, $4 checkpoint prefix, $5 previous checkpoint prefix, $6 run
// name, $7 action name, $8 run start time. FIXTURES and SHARED are set.
func (h *harness) spec(name, script string, o taskOpts) *task.TaskSpec {
	env := []*core.KeyValuePair{{Key: "FIXTURES", Value: h.fixtures}, {Key: "SHARED", Value: h.shared}}
	for k, v := range o.env {
		env = append(env, &core.KeyValuePair{Key: k, Value: v})
	}
	md := &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: o.retries},
		Discoverable: o.cacheVersion != "", DiscoveryVersion: o.cacheVersion, CacheSerializable: o.serialize}
	if o.timeout > 0 {
		md.Timeout = durationpb.New(o.timeout)
	}
	if o.deadline > 0 || o.queued > 0 {
		md.Timeouts = &core.TimeoutStrategy{}
		if o.deadline > 0 {
			md.Timeouts.Deadline = durationpb.New(o.deadline)
		}
		if o.queued > 0 {
			md.Timeouts.QueuedTimeout = durationpb.New(o.queued)
		}
	}
	tt := o.taskType
	if tt == "" {
		tt = "python"
	}
	var sc *core.SecurityContext
	if len(o.secrets) > 0 {
		sc = &core.SecurityContext{Secrets: o.secrets}
	}
	return &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:                &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "development", Name: "t." + name, Version: "v1"},
		Type:              tt,
		Metadata:          md,
		SecurityContext:   sc,
		ExtendedResources: o.extended,
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Resources: o.resources,
			Image:     "ignored",
			Args: []string{"a0", script, "{{.input}}", "{{.outputPrefix}}", "{{.rawOutputDataPrefix}}",
				"{{.checkpointOutputPrefix}}", "{{.prevCheckpointPrefix}}", "{{.runName}}", "{{.actionName}}", "{{.runStartTime}}"},
			Env: env,
		}},
	}}
}

// run creates a run whose root runs script.
func (h *harness) run(name, script string, o taskOpts) store.ActionKey {
	h.t.Helper()
	rs := &task.RunSpec{MaxActionConcurrency: o.limit}
	if len(o.runEnv) > 0 {
		rs.Envs = &task.Envs{}
		for k, v := range o.runEnv {
			rs.Envs.Values = append(rs.Envs.Values, &core.KeyValuePair{Key: k, Value: v})
		}
	}
	_, err := h.state.CreateRun(h.ctx, &workflow.CreateRunRequest{
		Id:      &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: name}},
		Task:    &workflow.CreateRunRequest_TaskSpec{TaskSpec: h.spec(name, script, o)},
		RunSpec: rs,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return store.RunKey{Project: "p", Domain: "development", RunName: name}.Action(store.RootName)
}

// child enqueues a child action of parent that runs script.
func (h *harness) child(parent store.ActionKey, name, script string, o taskOpts) store.ActionKey {
	h.t.Helper()
	p, err := h.st.Actions.Get(h.ctx, parent)
	if err != nil {
		h.t.Fatal(err)
	}
	key := parent.RunKey.Action(name)
	pn := parent.Name
	err = h.state.Enqueue(h.ctx, &actions.Action{
		ActionId:         &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "development", Name: parent.RunName}, Name: name},
		ParentActionName: &pn,
		InputUri:         p.RunOutputBase + "/" + name + "/inputs.pb",
		RunOutputBase:    p.RunOutputBase,
		Spec:             &actions.Action_Task{Task: &workflow.TaskAction{Spec: h.spec(name, script, o)}},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return key
}

// wait polls key until cond holds.
func (h *harness) wait(key store.ActionKey, what string, d time.Duration, cond func(a *store.Action) bool) *store.Action {
	h.t.Helper()
	var a *store.Action
	if testkit.Poll(d, 20*time.Millisecond, func() string {
		var err error
		if a, err = h.st.Actions.Get(h.ctx, key); err != nil {
			h.t.Fatal(err)
		}
		if cond(a) {
			return ""
		}
		return "not yet"
	}) != "" {
		h.dumpLogs(key)
		h.t.Fatalf("%s: %s did not become %s within %s (phase %s, attempt %d)", h.t.Name(), key.Name, what, d, a.Phase.String(), a.Attempts)
	}
	return a
}

// terminal waits for key to end and checks the phase.
func (h *harness) terminal(key store.ActionKey, want phase.Phase, d time.Duration) *store.Action {
	h.t.Helper()
	a := h.wait(key, "terminal", d, func(a *store.Action) bool { return a.Phase.Terminal() })
	if a.Phase != want {
		h.dumpLogs(key)
		h.t.Fatalf("%s ended %s, want %s (error %v)", key.Name, a.Phase.String(), want.String(), execErr(a.ErrorInfo))
	}
	return a
}

func (h *harness) attempts(key store.ActionKey) []store.Attempt {
	h.t.Helper()
	atts, err := h.st.Actions.Attempts(h.ctx, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return atts
}

// phases lists the phases attempt n went through.
func (h *harness) phases(key store.ActionKey, n int32) []string {
	h.t.Helper()
	evs, err := h.st.Actions.Events(h.ctx, key)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Attempt == n && (len(out) == 0 || out[len(out)-1] != e.Phase.String()) {
			out = append(out, e.Phase.String())
		}
	}
	return out
}

func (h *harness) logPath(key store.ActionKey, n int32) string {
	dir, err := attemptDir(h.workDir, key, n)
	if err != nil {
		h.t.Fatal(err)
	}
	return filepath.Join(dir, logFile)
}

// dumpLogs shows every attempt log of key.
func (h *harness) dumpLogs(key store.ActionKey) {
	for n := int32(1); n < 10; n++ {
		lines, err := process.ReadLog(h.logPath(key, n))
		if err != nil {
			continue
		}
		for _, l := range lines {
			h.t.Logf("%s attempt %d %s: %s", key.Name, n, l.Stream, l.Message)
		}
	}
}

// sharedFile is the path of a file in the shared directory.
func (h *harness) sharedFile(name string) string { return filepath.Join(h.shared, name) }

func (h *harness) readShared(name string) string {
	b, _ := os.ReadFile(h.sharedFile(name))
	return string(b)
}

func execErr(b []byte) *core.ExecutionError {
	if len(b) == 0 {
		return nil
	}
	e := &core.ExecutionError{}
	if err := proto.Unmarshal(b, e); err != nil {
		return &core.ExecutionError{Message: "unreadable: " + err.Error()}
	}
	return e
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func writeProto(t *testing.T, path string, m proto.Message) {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b), 0o644)
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X'
}

// testLog sends slog output to t.Log until the test ends.
type testLog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

var _ io.Writer = (*testLog)(nil)

// newState builds a run state over h's store, storage and hub, with the
// executor newExecutor makes (runstate.New).
func newState[E runstate.Executor](h *harness, newExecutor func(*runstate.Service) E) (*runstate.Service, E) {
	return runstate.New(h.st, h.blobs, h.hub, config.Projects{AutoCreate: true}, h.log, newExecutor)
}
