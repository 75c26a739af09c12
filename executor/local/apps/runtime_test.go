package apps

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gproto "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/testkit"
)

// server is a tiny app: it serves on $PORT (127.0.0.1 only, as uvicorn
// does by default) and answers with its pid, the path it got and the
// prefix the proxy removed.
const server = `
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("pid=%d path=%s prefix=%s" % (os.getpid(), self.path, self.headers.get("X-Forwarded-Prefix"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
print("serving on", os.environ["PORT"], "as uid", os.getuid(), flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`

// reports collects what the runtime reports.
type reports struct {
	mu  sync.Mutex
	all []appruntime.Report
}

func (r *reports) Report(_ context.Context, rep appruntime.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rep)
	return nil
}

func (r *reports) last() appruntime.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.all) == 0 {
		return appruntime.Report{}
	}
	return r.all[len(r.all)-1]
}

type harness struct {
	rt    *Runtime
	rep   *reports
	users *runas.Leaser
	url   string
}

func newHarness(t *testing.T, opts ...func(*Config)) *harness {
	t.Helper()
	dir := testkit.TaskDir(t)
	rep := &reports{}
	runner := process.NewRunner(process.Config{BinDir: filepath.Dir(sdktest.Python(t)), KillGrace: 2 * time.Second, Confine: []string{dir}})
	users := runas.New(config.RunAs{}, os.Geteuid())
	// As the local driver does with its work directory: the replicas'
	// group may enter it, and what is made in it inherits the group.
	if users.Separate() {
		if err := os.Chown(dir, -1, int(users.Group())); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, os.ModeSetgid|0o750); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{
		Dir:      dir + "/apps",
		Runner:   func() *process.Runner { return runner },
		Users:    users,
		Endpoint: func() string { return "127.0.0.1:1" },
		Host:     os.Environ(),
		Reporter: rep,
		Backoff:  50 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	rt := New(cfg)
	rt.Synced() // the apps are the test's: none to load
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	hs := httptest.NewServer(rt.Proxy("/apps"))
	t.Cleanup(hs.Close)
	return &harness{rt: rt, rep: rep, users: users, url: hs.URL}
}

var key = appruntime.Key{Project: "flytesnacks", Domain: "development", Name: "hello"}

func spec(min, max uint32, args ...string) *pb.Spec {
	return &pb.Spec{
		DesiredState: pb.Spec_DESIRED_STATE_ACTIVE,
		AppPayload:   &pb.Spec_Container{Container: &core.Container{Args: args}},
		Autoscaling:  &pb.AutoscalingConfig{Replicas: &pb.Replicas{Min: min, Max: max}},
	}
}

func (h *harness) waitStatus(t *testing.T, st pb.Status_DeploymentStatus, sub pb.Status_Substate) appruntime.Report {
	t.Helper()
	var got appruntime.Report
	testkit.Eventually(t, fmt.Sprintf("the app to be %v/%v", st, sub), time.Minute, func() bool {
		got = h.rep.last()
		return got.Status == st && got.Substate == sub
	})
	return got
}

func (h *harness) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(h.url + "/apps/flytesnacks/development/hello" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Two replicas both serve through the proxy, each on a port of its own,
// with the app's path and prefix; stopping the app answers 503.
func TestTwoReplicasServeThenStop(t *testing.T) {
	h := newHarness(t)
	s := spec(2, 2, "python", "-c", server)
	h.rt.Apply(appruntime.Target{Key: key, Revision: 1, Spec: s})
	rep := h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	testkit.Eventually(t, "two ready replicas", time.Minute, func() bool { return h.rep.last().Replicas == 2 })
	_ = rep
	pids := map[string]bool{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	// Concurrent requests spread over the replicas (fewest in flight wins).
	for range 20 {
		wg.Go(func() {
			code, body := h.get(t, "/hi?x=1")
			if code != 200 || !strings.Contains(body, "path=/hi?x=1 prefix=/apps/flytesnacks/development/hello") {
				t.Errorf("got %d %q", code, body)
				return
			}
			mu.Lock()
			pids[strings.Fields(body)[0]] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(pids) != 2 {
		t.Errorf("requests reached %d replicas, want 2: %v", len(pids), pids)
	}

	// Its logs: both replicas' lines.
	var lines []string
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = h.rt.TailLogs(ctx, key, "", func(name string, ls []*dataplane.LogLine) error {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range ls {
				lines = append(lines, name+": "+l.GetMessage())
			}
			return nil
		})
	}()
	testkit.Eventually(t, "both replicas' lines", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(strings.Join(lines, ""), "serving on") == 2
	})
	cancel()
	// As root, replicas run as users of the attempts' range, never as root.
	if os.Geteuid() == 0 {
		mu.Lock()
		all := strings.Join(lines, "")
		mu.Unlock()
		// The default range starts at 2000000000.
		if strings.Contains(all, "as uid 0\n") || !strings.Contains(all, "as uid 20000") {
			t.Errorf("replicas did not run as users of the range:\n%s", all)
		}
	}

	stopped := gproto.Clone(s).(*pb.Spec)
	stopped.DesiredState = pb.Spec_DESIRED_STATE_STOPPED
	h.rt.Apply(appruntime.Target{Key: key, Revision: 2, Spec: stopped})
	h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_STOPPED, 0)
	code, body := h.get(t, "/")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "is stopped") {
		t.Fatalf("a stopped app answered %d %q", code, body)
	}
	testkit.Eventually(t, "the replicas' users to be released", 20*time.Second, func() bool { return h.users.Held() == 0 })
}

// An app with min 0 scales to zero after scaledown_after without a
// request, and the next request starts a replica and gets its answer.
func TestScaleToZeroAndWake(t *testing.T) {
	h := newHarness(t)
	s := spec(0, 1, "python", "-c", server)
	s.Autoscaling.ScaledownPeriod = durationpb.New(500 * time.Millisecond)
	h.rt.Apply(appruntime.Target{Key: key, Revision: 1, Spec: s})
	h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_SCALED_TO_ZERO)
	if n := len(h.rt.Replicas(key)); n != 1 || h.rt.Replicas(key)[0].Status != "ended" {
		t.Fatalf("replicas after scaling to zero: %v", h.rt.Replicas(key))
	}
	code, body := h.get(t, "/woken")
	if code != 200 || !strings.Contains(body, "path=/woken") {
		t.Fatalf("the request that woke the app got %d %q", code, body)
	}
}

// A replica that exits at once is restarted with backoff until the app
// ends FAILED with CRASH_LOOP and its last lines; its URL then says so.
func TestCrashLoop(t *testing.T) {
	h := newHarness(t)
	h.rt.Apply(appruntime.Target{Key: key, Revision: 1, Spec: spec(1, 1, "sh", "-c", "echo starting; echo 'boom: no config' >&2; exit 3")})
	rep := h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_CRASH_LOOP)
	if !strings.Contains(rep.Message, "exited with code 3") || !strings.Contains(rep.Message, "boom: no config") {
		t.Fatalf("crash loop message %q", rep.Message)
	}
	code, body := h.get(t, "/")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "boom: no config") {
		t.Fatalf("a failed app answered %d %q", code, body)
	}
	// A new revision starts over.
	h.rt.Apply(appruntime.Target{Key: key, Revision: 2, Spec: spec(1, 1, "python", "-c", server)})
	h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
}
