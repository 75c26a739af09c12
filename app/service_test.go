package app_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"gorm.io/gorm"

	"fmgr.dev/app"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeRuntime records what the service asks of it.
type fakeRuntime struct {
	mu      sync.Mutex
	applied []appruntime.Target
	removed []appruntime.Key
}

func (f *fakeRuntime) Apply(t appruntime.Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, t)
}

func (f *fakeRuntime) Remove(k appruntime.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, k)
}

func (f *fakeRuntime) Replicas(appruntime.Key) []appruntime.Replica {
	return []appruntime.Replica{{Name: "r0", Status: "running"}}
}

func (f *fakeRuntime) TailLogs(_ context.Context, _ appruntime.Key, _ string, emit func(string, []*dataplane.LogLine) error) error {
	return emit("r0", []*dataplane.LogLine{{Message: "hello from r0\n"}})
}

func (f *fakeRuntime) targets() []appruntime.Target {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]appruntime.Target(nil), f.applied...)
}

type harness struct {
	svc    *app.Service
	rt     *fakeRuntime
	client appconnect.AppServiceClient
	logs   appconnect.AppLogsServiceClient
}

func newHarness(t *testing.T, g *gorm.DB) *harness {
	t.Helper()
	rt := &fakeRuntime{}
	svc := app.NewService(app.NewStore(g), app.Options{Runtime: rt,
		PublicURL: func(_ context.Context, k app.Key) string {
			return "http://apps.test/" + k.Project + "/" + k.Domain + "/" + k.Name + "/"
		}})
	cfg := config.Default().Server
	cfg.Port = 0
	srv := server.New(cfg, nil)
	if err := app.Setup(srv, svc); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &harness{svc: svc, rt: rt, client: appconnect.NewAppServiceClient(hs.Client(), hs.URL),
		logs: appconnect.NewAppLogsServiceClient(hs.Client(), hs.URL)}
}

func appID(name string) *pb.Identifier {
	return &pb.Identifier{Project: "flytesnacks", Domain: "development", Name: name}
}

// sdkApp is an App as the SDK's `flyte deploy` sends it.
func sdkApp(name string, args ...string) *pb.App {
	return &pb.App{
		Metadata: &pb.Meta{Id: appID(name)},
		Spec: &pb.Spec{
			DesiredState: pb.Spec_DESIRED_STATE_ACTIVE,
			AppPayload: &pb.Spec_Container{Container: &core.Container{Image: "img", Args: args,
				Ports: []*core.ContainerPort{{ContainerPort: 8080}}}},
			Autoscaling: &pb.AutoscalingConfig{Replicas: &pb.Replicas{Min: 0, Max: 1}},
			Ingress:     &pb.IngressConfig{},
			ClusterPool: "default",
		},
	}
}

func lastStatus(a *pb.App) pb.Status_DeploymentStatus {
	c := a.GetStatus().GetConditions()
	if len(c) == 0 {
		return 0
	}
	return c[len(c)-1].GetDeploymentStatus()
}

func TestAppLifecycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		h := newHarness(t, g)
		ctx := context.Background()
		in := sdkApp("hello", "python", "app.py")
		created, err := h.client.Create(ctx, connect.NewRequest(&pb.CreateRequest{App: in}))
		if err != nil {
			t.Fatal(err)
		}
		a := created.Msg.GetApp()
		if a.GetMetadata().GetRevision() != 1 || lastStatus(a) != pb.Status_DEPLOYMENT_STATUS_DEPLOYING {
			t.Fatalf("created: revision %d, status %v", a.GetMetadata().GetRevision(), lastStatus(a))
		}
		// The spec comes back as sent, with an (empty) creator: the SDK
		// copies the stored creator into the spec it compares, so one left
		// unset would make every redeploy differ.
		want := proto.Clone(in.GetSpec()).(*pb.Spec)
		want.Creator = &common.EnrichedIdentity{}
		if !proto.Equal(a.GetSpec(), want) {
			t.Fatalf("the spec did not come back intact:\n got %v\nwant %v", a.GetSpec(), want)
		}
		if got := a.GetStatus().GetIngress().GetPublicUrl(); got != "http://apps.test/flytesnacks/development/hello/" {
			t.Fatalf("public_url %q", got)
		}
		if ts := h.rt.targets(); len(ts) != 1 || ts[0].Revision != 1 || !ts[0].Active() {
			t.Fatalf("runtime got %+v", ts)
		}

		// A second Create is ALREADY_EXISTS (the SDK then Gets and Updates).
		_, err = h.client.Create(ctx, connect.NewRequest(&pb.CreateRequest{App: in}))
		rpctest.WantCode(t, err, connect.CodeAlreadyExists, "exists already")

		// Watch the app from now on: the snapshot first.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := h.client.Watch(wctx, connect.NewRequest(&pb.WatchRequest{Target: &pb.WatchRequest_AppId{AppId: appID("hello")}}))
		if err != nil {
			t.Fatal(err)
		}
		if !stream.Receive() || lastStatus(stream.Msg().GetUpdateEvent().GetUpdatedApp()) != pb.Status_DEPLOYMENT_STATUS_DEPLOYING {
			t.Fatalf("snapshot: %v %v", stream.Msg(), stream.Err())
		}

		// The runtime reports it serving: a condition, newest last.
		if err := h.svc.Report(ctx, appruntime.Report{Key: appruntime.Key{Project: "flytesnacks", Domain: "development", Name: "hello"},
			Revision: 1, Status: pb.Status_DEPLOYMENT_STATUS_ACTIVE, Substate: pb.Status_RUNNING, Message: "1 replica serves", Replicas: 1}); err != nil {
			t.Fatal(err)
		}
		if !stream.Receive() {
			t.Fatal(stream.Err())
		}
		up := stream.Msg().GetUpdateEvent().GetUpdatedApp()
		if lastStatus(up) != pb.Status_DEPLOYMENT_STATUS_ACTIVE || up.GetStatus().GetCurrentReplicas() != 1 {
			t.Fatalf("update: %v", up.GetStatus())
		}
		// A stale report (another revision) changes nothing.
		if err := h.svc.Report(ctx, appruntime.Report{Key: appruntime.Key{Project: "flytesnacks", Domain: "development", Name: "hello"},
			Revision: 7, Status: pb.Status_DEPLOYMENT_STATUS_FAILED}); err != nil {
			t.Fatal(err)
		}

		// Deploying the same spec again (the SDK's replace, after Get) is a
		// no-op: same revision, the runtime is not asked again.
		got, err := h.client.Get(ctx, connect.NewRequest(&pb.GetRequest{Identifier: &pb.GetRequest_AppId{AppId: appID("hello")}}))
		if err != nil {
			t.Fatal(err)
		}
		cur := got.Msg.GetApp()
		if lastStatus(cur) != pb.Status_DEPLOYMENT_STATUS_ACTIVE {
			t.Fatalf("get after a stale report: %v", cur.GetStatus())
		}
		// As remote.App.replace sends it: the deployed spec with the stored
		// creator copied in, the stored revision and status.
		redeploy := &pb.App{Metadata: &pb.Meta{Id: appID("hello"), Revision: cur.GetMetadata().GetRevision()}, Spec: proto.Clone(in.GetSpec()).(*pb.Spec), Status: cur.GetStatus()}
		redeploy.Spec.Creator = &common.EnrichedIdentity{} // CopyFrom sets it, even from nothing
		if c := cur.GetSpec().GetCreator(); c != nil {
			proto.Merge(redeploy.Spec.Creator, c)
		}
		same, err := h.client.Update(ctx, connect.NewRequest(&pb.UpdateRequest{App: redeploy, Reason: "redeploy"}))
		if err != nil {
			t.Fatal(err)
		}
		if same.Msg.GetApp().GetMetadata().GetRevision() != 1 || len(h.rt.targets()) != 1 {
			t.Fatalf("an unchanged update made revision %d, %d applies", same.Msg.GetApp().GetMetadata().GetRevision(), len(h.rt.targets()))
		}

		// Deactivate as `flyte update app --deactivate` does: the full App
		// from Get with the desired state STOPPED.
		stop := proto.Clone(cur).(*pb.App)
		stop.Spec.DesiredState = pb.Spec_DESIRED_STATE_STOPPED
		stopped, err := h.client.Update(ctx, connect.NewRequest(&pb.UpdateRequest{App: stop, Reason: "user asked"}))
		if err != nil {
			t.Fatal(err)
		}
		if stopped.Msg.GetApp().GetMetadata().GetRevision() != 2 || lastStatus(stopped.Msg.GetApp()) != pb.Status_DEPLOYMENT_STATUS_STOPPED {
			t.Fatalf("stopped: %v", stopped.Msg.GetApp())
		}
		if ts := h.rt.targets(); len(ts) != 2 || ts[1].Active() {
			t.Fatalf("runtime got %+v", ts)
		}
		// An update from the revision before is refused.
		_, err = h.client.Update(ctx, connect.NewRequest(&pb.UpdateRequest{App: cur}))
		rpctest.WantCode(t, err, connect.CodeAborted, "revision 2, not 1")

		// Activate (the SDK sends the deprecated STARTED) from the stored app.
		start := proto.Clone(stopped.Msg.GetApp()).(*pb.App)
		start.Spec.DesiredState = pb.Spec_DESIRED_STATE_STARTED
		started, err := h.client.Update(ctx, connect.NewRequest(&pb.UpdateRequest{App: start}))
		if err != nil {
			t.Fatal(err)
		}
		if st := lastStatus(started.Msg.GetApp()); st != pb.Status_DEPLOYMENT_STATUS_DEPLOYING {
			t.Fatalf("started: %v", st)
		}
		conds := started.Msg.GetApp().GetStatus().GetConditions()
		if len(conds) != 4 || conds[len(conds)-1].GetRevision() != 3 {
			t.Fatalf("conditions, newest last: %v", conds)
		}

		// List with the SDK's filters.
		list, err := h.client.List(ctx, connect.NewRequest(&pb.ListRequest{
			FilterBy: &pb.ListRequest_Project{Project: &common.ProjectIdentifier{Name: "flytesnacks", Domain: "development"}},
			Request: &common.ListRequest{Limit: 100, SortBy: &common.Sort{Key: "created_at", Direction: common.Sort_ASCENDING},
				Filters: []*common.Filter{{Field: "status_phase", Function: common.Filter_VALUE_IN, Values: []string{"DEPLOYMENT_STATUS_DEPLOYING", "DEPLOYMENT_STATUS_ACTIVE"}}}},
			IncludeTotalCount: true,
		}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetApps()) != 1 || list.Msg.GetTotalCount() != 1 {
			t.Fatalf("list: %v", list.Msg)
		}
		_, err = h.client.List(ctx, connect.NewRequest(&pb.ListRequest{Request: &common.ListRequest{
			Filters: []*common.Filter{{Field: "status_phase", Function: common.Filter_EQUAL, Values: []string{"RUNNINGISH"}}}}}))
		rpctest.WantCode(t, err, connect.CodeInvalidArgument, "not a deployment status")

		// Logs: the replicas, then their lines.
		logs, err := h.logs.TailLogs(ctx, connect.NewRequest(&pb.TailLogsRequest{Target: &pb.TailLogsRequest_AppId{AppId: appID("hello")}}))
		if err != nil {
			t.Fatal(err)
		}
		if !logs.Receive() || len(logs.Msg().GetReplicas().GetReplicas()) != 1 {
			t.Fatalf("replicas: %v %v", logs.Msg(), logs.Err())
		}
		if !logs.Receive() || logs.Msg().GetBatches().GetLogs()[0].GetStructuredLines()[0].GetMessage() != "hello from r0\n" {
			t.Fatalf("lines: %v %v", logs.Msg(), logs.Err())
		}

		// Delete: NOT_FOUND afterwards, the runtime told.
		if _, err := h.client.Delete(ctx, connect.NewRequest(&pb.DeleteRequest{AppId: appID("hello")})); err != nil {
			t.Fatal(err)
		}
		_, err = h.client.Get(ctx, connect.NewRequest(&pb.GetRequest{Identifier: &pb.GetRequest_AppId{AppId: appID("hello")}}))
		rpctest.WantCode(t, err, connect.CodeNotFound, "hello")
		_, err = h.client.Delete(ctx, connect.NewRequest(&pb.DeleteRequest{AppId: appID("hello")}))
		rpctest.WantCode(t, err, connect.CodeNotFound)
		testkit.Eventually(t, "the delete event", 10*time.Second, func() bool {
			for stream.Receive() {
				if stream.Msg().GetDeleteEvent() != nil {
					return true
				}
			}
			return false
		})
	})
}

func TestAppBadInput(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		h := newHarness(t, g)
		ctx := context.Background()
		for _, tc := range []struct {
			name string
			app  *pb.App
			want string
		}{
			{"no id", &pb.App{Spec: sdkApp("x").Spec}, "app_id is required"},
			{"bad name", sdkApp("Not_A_Label"), "DNS label"},
			{"no spec", &pb.App{Metadata: &pb.Meta{Id: appID("x")}}, "spec is required"},
			{"min over max", func() *pb.App {
				a := sdkApp("x")
				a.Spec.Autoscaling.Replicas = &pb.Replicas{Min: 3, Max: 1}
				return a
			}(), "min replicas 3 is more than max 1"},
		} {
			_, err := h.client.Create(ctx, connect.NewRequest(&pb.CreateRequest{App: tc.app}))
			rpctest.WantCode(t, err, connect.CodeInvalidArgument, tc.want)
		}
		_, err := h.client.Get(ctx, connect.NewRequest(&pb.GetRequest{Identifier: &pb.GetRequest_AppId{AppId: appID("nope")}}))
		rpctest.WantCode(t, err, connect.CodeNotFound)
	})
}

// An app created or deleted through another manager on the same database
// reaches this manager's runtime at its next resync.
func TestRunResyncsFromTheDatabase(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		rt := &fakeRuntime{}
		mine := app.NewService(app.NewStore(g), app.Options{Runtime: rt, Resync: 50 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = mine.Run(ctx) }()
		defer func() { cancel(); <-done }()

		other := newHarness(t, g) // another manager's API
		if _, err := other.client.Create(ctx, connect.NewRequest(&pb.CreateRequest{App: sdkApp("elsewhere", "python", "app.py")})); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the app to reach this runtime", 10*time.Second, func() bool {
			for _, tg := range rt.targets() {
				if tg.Key.Name == "elsewhere" && tg.Revision == 1 {
					return true
				}
			}
			return false
		})
		if _, err := other.client.Delete(ctx, connect.NewRequest(&pb.DeleteRequest{AppId: appID("elsewhere")})); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the app's removal to reach this runtime", 10*time.Second, func() bool {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return len(rt.removed) == 1 && rt.removed[0].Name == "elsewhere"
		})
	})
}

// A watch of one app on a manager that does not run it sees the reports
// of the manager that does (the SDK's `flyte serve` waits this way).
func TestWatchSeesAnotherManagersReports(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		runs, serves := newHarness(t, g), newHarness(t, g)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := runs.client.Create(ctx, connect.NewRequest(&pb.CreateRequest{App: sdkApp("shared", "python", "app.py")})); err != nil {
			t.Fatal(err)
		}
		stream, err := serves.client.Watch(ctx, connect.NewRequest(&pb.WatchRequest{Target: &pb.WatchRequest_AppId{AppId: appID("shared")}}))
		if err != nil {
			t.Fatal(err)
		}
		if !stream.Receive() {
			t.Fatal(stream.Err())
		}
		if err := runs.svc.Report(ctx, appruntime.Report{Key: appruntime.Key{Project: "flytesnacks", Domain: "development", Name: "shared"},
			Revision: 1, Status: pb.Status_DEPLOYMENT_STATUS_ACTIVE, Substate: pb.Status_RUNNING, Replicas: 1}); err != nil {
			t.Fatal(err)
		}
		if !stream.Receive() {
			t.Fatal(stream.Err())
		}
		if st := lastStatus(stream.Msg().GetUpdateEvent().GetUpdatedApp()); st != pb.Status_DEPLOYMENT_STATUS_ACTIVE {
			t.Fatalf("the watch on the other manager got %v", st)
		}
	})
}
