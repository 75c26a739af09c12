package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"gorm.io/gorm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/testcluster"
	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

func TestMain(m *testing.M) {
	if os.Getenv(envImageBuilder) != "" {
		os.Exit(imageBuilderMain(os.Args[1:]))
	}
	pgtest.Main(m)
}

// harness is a test cluster (API server, etcd, a node agent running Pods as
// local processes) and a run state on a real database, with the driver
// reconciling against them.
type harness struct {
	t        *testing.T
	ctx      context.Context
	cluster  *testcluster.Cluster
	k        client.Client // an administrator's client
	state    *runstate.Service
	st       *store.Store
	d        *Driver
	stop     func() // stops d
	fixtures string
	blobDir  string // shared by every replica
}

// newHarness starts a cluster and a driver on the database at dsn.
func newHarness(t *testing.T, dsn string, tune ...func(*config.KubernetesExecutor)) *harness {
	t.Helper()
	return newHarnessWith(t, dsn, nil, tune...)
}

// newHarnessWith is newHarness with the hooks hooks builds over the
// harness's database joining the driver's planning.
func newHarnessWith(t *testing.T, dsn string, hooks func(*gorm.DB) attempt.Hooks, tune ...func(*config.KubernetesExecutor)) *harness {
	t.Helper()
	return newHarnessOpts(t, dsn, harnessOpts{hooks: hooks}, tune...)
}

// harnessOpts are a harness's optional parts.
type harnessOpts struct {
	// hooks builds the hooks joining the driver's planning.
	hooks func(*gorm.DB) attempt.Hooks
	// asDriver is the driver's client configuration, made once the cluster
	// runs; the administrator's when nil.
	asDriver func(*testcluster.Cluster) *rest.Config
	// cluster are the test cluster's options (its Pods' environment).
	cluster testcluster.Options
}

func newHarnessOpts(t *testing.T, dsn string, o harnessOpts, tune ...func(*config.KubernetesExecutor)) *harness {
	t.Helper()
	hooks := o.hooks
	c := testcluster.ForTest(t, o.cluster)
	rc := c.Config
	if o.asDriver != nil {
		rc = o.asDriver(c)
	}
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	k, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, cluster: c, k: k, fixtures: t.TempDir(), blobDir: filepath.Join(t.TempDir(), "blobs")}
	g := dbtest.Migrated(t, dsn)
	var env *statetest.Env
	h.state, h.d, env = statetest.New(t, g, statetest.Options{BlobDir: h.blobDir}, func(s *runstate.Service) *Driver {
		cfg := config.Default().Executor.Kubernetes
		cfg.SharedFileStorage = true
		cfg.LeaseTTL = 4 * time.Second
		for _, f := range tune {
			f(&cfg)
		}
		d := New(s, rc, cfg, t.TempDir(), func() string { return "127.0.0.1:1" }, testLog())
		if hooks != nil {
			d.WithHooks(hooks(g))
		}
		return d
	})
	h.st = env.Store
	h.stop = h.start(h.d, true)
	writeProto(t, filepath.Join(h.fixtures, "outputs.pb"), &task.Outputs{Literals: []*task.NamedLiteral{{Name: "o0",
		Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 7}}}}}}}}})
	writeProto(t, filepath.Join(h.fixtures, "recoverable.pb"), &core.ErrorDocument{Error: &core.ContainerError{
		Code: "ValueError", Message: "try again", Kind: core.ContainerError_RECOVERABLE, Origin: core.ExecutionError_USER}})
	return h
}

// start runs d until the test ends or stop is called, and waits until it
// is ready (and, with holder, holds the lease).
func (h *harness) start(d *Driver, holder bool) (stop func()) {
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("driver: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	h.eventually("the driver to sync (and take the lease)", func() bool {
		select {
		case err := <-done:
			done <- err // for the cleanup
			h.t.Fatalf("the driver stopped: %v", err)
		default:
		}
		return d.Ready() == nil && (!holder || d.lease.Fence() != 0)
	})
	return stop
}

func writeProto(t *testing.T, path string, m proto.Message) {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// taskOpts shape a test task.
type taskOpts struct {
	retries     uint32
	timeout     time.Duration
	limit       uint32 // the run's max_action_concurrency
	podTemplate string
	secrets     []*core.Secret
	// serviceAccount is what the task asks to run as
	// (security_context.run_as.k8s_service_account).
	serviceAccount string
}

// spec is a task whose container runs script with sh: $1 is the input
// file, $2 the output prefix; FIXTURES names the fixtures directory.
func (h *harness) spec(name, script string, o taskOpts) *task.TaskSpec {
	md := &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: o.retries}, PodTemplateName: o.podTemplate}
	if o.timeout > 0 {
		md.Timeout = durationpb.New(o.timeout)
	}
	var sc *core.SecurityContext
	if len(o.secrets) > 0 || o.serviceAccount != "" {
		sc = &core.SecurityContext{Secrets: o.secrets}
	}
	if o.serviceAccount != "" {
		sc.RunAs = &core.Identity{K8SServiceAccount: o.serviceAccount}
	}
	return &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:              &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "development", Name: "t." + name, Version: "v1"},
		Type:            "python",
		Metadata:        md,
		SecurityContext: sc,
		Interface:       &core.TypedInterface{Outputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "o0", Value: &core.Variable{}}}}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ignored",
			Args:  []string{"sh", "-c", script, "a0", "{{.input}}", "{{.outputPrefix}}"},
			Env:   []*core.KeyValuePair{{Key: "FIXTURES", Value: h.fixtures}},
			Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{{Name: core.Resources_CPU, Value: "100m"},
				{Name: core.Resources_MEMORY, Value: "64Mi"}}},
		}},
	}}
}

// succeed is a script that writes the outputs and exits 0.
const succeed = `cp "$FIXTURES/outputs.pb" "$2/outputs.pb"`

// run creates a run whose root runs script.
func (h *harness) run(name, script string, o taskOpts) store.ActionKey {
	h.t.Helper()
	return h.runOn(h.state, name, script, o)
}

// runOn creates the run through state (another replica's).
func (h *harness) runOn(state *runstate.Service, name, script string, o taskOpts) store.ActionKey {
	h.t.Helper()
	return h.runIn(state, "p", name, script, o)
}

// runIn creates the run in project (domain development) through state.
func (h *harness) runIn(state *runstate.Service, project, name, script string, o taskOpts) store.ActionKey {
	h.t.Helper()
	spec := h.spec(name, script, o)
	spec.TaskTemplate.Id.Project = project
	_, err := state.CreateRun(h.ctx, &workflow.CreateRunRequest{
		Id:      &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: project, Domain: "development", Name: name}},
		Task:    &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec},
		RunSpec: &task.RunSpec{MaxActionConcurrency: o.limit},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return store.RunKey{Project: project, Domain: "development", RunName: name}.Action(store.RootName)
}

// child enqueues a child action of parent that runs script.
func (h *harness) child(parent store.ActionKey, name, script string) store.ActionKey {
	h.t.Helper()
	p, err := h.st.Actions.Get(h.ctx, parent)
	if err != nil {
		h.t.Fatal(err)
	}
	pn := parent.Name
	err = h.state.Enqueue(h.ctx, &actions.Action{
		ActionId:         &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "development", Name: parent.RunName}, Name: name},
		ParentActionName: &pn,
		InputUri:         p.RunOutputBase + "/" + name + "/inputs.pb",
		RunOutputBase:    p.RunOutputBase,
		Spec:             &actions.Action_Task{Task: &workflow.TaskAction{Spec: h.spec(name, script, taskOpts{})}},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return parent.RunKey.Action(name)
}

// eventually polls cond with a generous deadline.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	testkit.Eventually(h.t, what, testcluster.Patience, cond)
}

// action reads key's row.
// started waits until a script has touched $FIXTURES/marker: a Pod is
// Running before its script's first line runs, and a test that stops the
// first attempt must not stop it before the script recorded that it ran
// (the next attempt would take the first attempt's branch again).
func (h *harness) started(marker string) {
	h.eventually("the script to touch "+marker, func() bool {
		_, err := os.Stat(filepath.Join(h.fixtures, marker))
		return err == nil
	})
}

func (h *harness) action(key store.ActionKey) *store.Action {
	h.t.Helper()
	a, err := h.st.Actions.Get(h.ctx, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// terminal waits for key to end and checks the phase.
func (h *harness) terminal(key store.ActionKey, want phase.Phase) *store.Action {
	h.t.Helper()
	var a *store.Action
	h.eventually(key.String()+" to end", func() bool { a = h.action(key); return a.Phase.Terminal() })
	if a.Phase != want {
		h.t.Fatalf("%s ended %s, want %s (error %v)", key, a.Phase, want, v1.ErrorStateOf(a.ErrorInfo))
	}
	return a
}

// taskAction reads key's TaskAction.
func (h *harness) taskAction(key store.ActionKey) (*v1.TaskAction, error) {
	ta := &v1.TaskAction{}
	return ta, h.k.Get(h.ctx, h.d.nameOf(key), ta)
}

// pod reads attempt n's Pod of key.
func (h *harness) pod(key store.ActionKey, n int32) (*corev1.Pod, error) {
	name := h.d.nameOf(key)
	pod := &corev1.Pod{}
	return pod, h.k.Get(h.ctx, client.ObjectKey{Namespace: name.Namespace, Name: podNameFor(name.Name, n)}, pod)
}

// condition is "reason/status" of ta's condition c, "" when unset.
func condition(ta *v1.TaskAction, c string) string {
	if cond := ta.Condition(c); cond != nil {
		return fmt.Sprintf("%s/%s", cond.Reason, cond.Status)
	}
	return ""
}

func storeKey(project, domain, run, action string) store.ActionKey {
	return store.RunKey{Project: project, Domain: domain, RunName: run}.Action(action)
}

func objKey(ta *v1.TaskAction) client.ObjectKey { return client.ObjectKeyFromObject(ta) }

// testLog discards the driver's logs, unless FM_KUBE_TEST_LOG is set (then
// they go to stderr, for debugging).
func testLog() *slog.Logger {
	if os.Getenv("FM_KUBE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
