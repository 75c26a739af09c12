package apps

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/netns"
	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/testkit"
)

// portServer is an app that binds 127.0.0.1:8080 whatever PORT says (as
// many apps do) and answers /reach?addr=host:port (or ?env=NAME, the
// address in that variable) with whether it can connect there.
const portServer = `
import http.server, os, socket, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        body = "pid=%d" % os.getpid()
        if u.path == "/reach":
            addr = q["addr"][0] if "addr" in q else os.environ[q["env"][0]]
            host, port = addr.rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
                body = "reached " + addr
            except OSError as e:
                body = "unreachable %s: %s" % (addr, e)
        b = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
print("serving on 127.0.0.1:8080, PORT", os.environ["PORT"], flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", 8080), H).serve_forever()
`

func needNamespaces(t *testing.T) {
	t.Helper()
	if err := netns.Supported(); err != nil {
		t.Skipf("this host makes no network namespaces (run as root): %v", err)
	}
}

// listen opens a listener on the host's loopback that accepts and closes.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l
}

// Two replicas of an app that binds 127.0.0.1:8080 both serve: each has
// a network of its own. From there a replica reaches the manager's
// endpoint (through the forwarder into its namespace, at the address its
// environment names) and nothing else on the host's loopback.
func TestReplicasBindTheSamePortInNamespacesOfTheirOwn(t *testing.T) {
	needNamespaces(t)
	manager := listen(t)
	h := newHarness(t, func(c *Config) { c.Endpoint = func() string { return manager.Addr().String() } })
	h.rt.Apply(appruntime.Target{Key: key, Revision: 1, Spec: spec(2, 2, "python", "-c", portServer)})
	h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	testkit.Eventually(t, "two ready replicas", time.Minute, func() bool { return h.rep.last().Replicas == 2 })
	pids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			code, body := h.get(t, "/")
			if code != 200 || !strings.HasPrefix(body, "pid=") {
				t.Errorf("got %d %q", code, body)
				return
			}
			mu.Lock()
			pids[body] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(pids) != 2 {
		t.Fatalf("requests reached %d replicas, want 2: %v", len(pids), pids)
	}

	// The socket the proxy dials lies in a directory of the manager's
	// alone.
	h.rt.mu.Lock()
	for _, rep := range h.rt.apps[key].replicas {
		fi, err := os.Stat(filepath.Join(rep.root, "net"))
		if err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
			t.Errorf("replica %s: its net/ directory: %v %v", rep.name, fi, err)
		}
		if _, err := os.Stat(filepath.Join(rep.root, "net", sockName)); err != nil {
			t.Errorf("replica %s: no socket: %v", rep.name, err)
		}
	}
	h.rt.mu.Unlock()

	host := listen(t)
	if code, body := h.get(t, "/reach?addr="+host.Addr().String()); code != 200 || !strings.HasPrefix(body, "unreachable") {
		t.Errorf("a replica reached a listener on the host's loopback: %d %q", code, body)
	}
	_, port, _ := net.SplitHostPort(manager.Addr().String())
	if code, body := h.get(t, "/reach?env=_U_EP_OVERRIDE"); code != 200 || body != "reached 127.0.0.1:"+port {
		t.Errorf("a replica did not reach the manager's endpoint: %d %q", code, body)
	}
}

// With apps.network: host, replicas share the manager's network: each is
// given a free port in PORT (the harness's server binds it), and the
// host's loopback is theirs to reach.
func TestHostNetworkGivesAFreePort(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Network = NetworkHost })
	h.rt.Apply(appruntime.Target{Key: key, Revision: 1, Spec: spec(2, 2, "python", "-c", server)})
	testkit.Eventually(t, "two ready replicas", time.Minute, func() bool {
		r := h.rep.last()
		return r.Status == pb.Status_DEPLOYMENT_STATUS_ACTIVE && r.Replicas == 2
	})
	h.rt.mu.Lock()
	for _, a := range h.rt.apps {
		for _, rep := range a.replicas {
			if rep.net.ns != nil || rep.net.port == DefaultAppPort {
				t.Errorf("replica %s: namespace %v, port %d", rep.name, rep.net.ns != nil, rep.net.port)
			}
		}
	}
	h.rt.mu.Unlock()
	if code, body := h.get(t, "/x"); code != 200 || !strings.Contains(body, "path=/x") {
		t.Fatalf("got %d %q", code, body)
	}
}

// secretServer answers with the secret it got in GREETING and in the file
// FLYTE_SECRETS_DEFAULT_DIR/greeting, and the storage key it was given.
const secretServer = `
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(os.environ["FLYTE_SECRETS_DEFAULT_DIR"], "greeting")) as f:
            body = "env=%s file=%s key=%s" % (os.environ.get("GREETING"), f.read(), os.environ.get("FLYTE_AWS_ACCESS_KEY_ID"))
        b = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`

// An app's secrets reach its replica as a task's reach its attempt (a
// variable, a file of its user's alone), with a storage key of its own
// minted for its prefix; the files go when the replica ends. A secret
// that does not exist keeps the app from starting, saying which.
func TestAppSecretsAndStorageKey(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	h := newHarness(t, func(c *Config) {
		c.RawDataPrefix = "s3://flyte/apps"
		c.Secrets = func(_ context.Context, k appruntime.Key, names []string) (map[string][]byte, error) {
			mu.Lock()
			asked = append(asked, k.Project+"/"+k.Domain+":"+strings.Join(names, ","))
			mu.Unlock()
			if k.Project == key.Project && slices.Contains(names, "greeting") {
				return map[string][]byte{"greeting": []byte("s3cr3t")}, nil
			}
			return map[string][]byte{}, nil
		}
		c.StorageKey = func(k appruntime.Key, prefix string) ([]contract.Secret, error) {
			return []contract.Secret{{Key: "storage:FLYTE_AWS_ACCESS_KEY_ID", EnvVar: "FLYTE_AWS_ACCESS_KEY_ID", Value: []byte("key-for-" + prefix)}}, nil
		}
	})
	s := spec(1, 1, "python", "-c", secretServer)
	s.SecurityContext = &pb.SecurityContext{Secrets: []*core.Secret{
		{Key: "greeting", EnvVar: "GREETING"},
		{Key: "greeting", MountRequirement: core.Secret_FILE},
	}}
	h.rt.Apply(appruntime.Target{Key: key, Revision: 1, Spec: s})
	h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	code, body := h.get(t, "/")
	if want := "env=s3cr3t file=s3cr3t key=key-for-s3://flyte/apps/flytesnacks/development/hello"; code != 200 || body != want {
		t.Fatalf("got %d %q, want %q", code, body, want)
	}
	mu.Lock()
	if len(asked) == 0 || asked[0] != "flytesnacks/development:greeting" {
		t.Errorf("secrets looked up: %v", asked)
	}
	mu.Unlock()
	h.rt.mu.Lock()
	rep := h.rt.apps[key].replicas[0]
	h.rt.mu.Unlock()
	sdir := filepath.Join(rep.root, "secrets")
	fi, err := os.Stat(sdir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the replica's secrets directory: %v %v", fi, err)
	}
	if os.Geteuid() == 0 {
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != rep.user.UID {
			t.Errorf("the secrets belong to uid %d, the replica runs as %d", st.Uid, rep.user.UID)
		}
	}

	// A new revision asks for a secret that does not exist.
	s2 := gproto.Clone(s).(*pb.Spec)
	s2.SecurityContext.Secrets = append(s2.SecurityContext.Secrets, &core.Secret{Key: "missing"})
	h.rt.Apply(appruntime.Target{Key: key, Revision: 2, Spec: s2})
	failed := h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_FAILED, pb.Status_CRASH_LOOP)
	if !strings.Contains(failed.Message, `secret missing not found in project flytesnacks, domain development`) || strings.Contains(failed.Message, "s3cr3t") {
		t.Errorf("the failed app's message: %q", failed.Message)
	}
	testkit.Eventually(t, "the ended replica's secrets to be removed", 20*time.Second, func() bool {
		_, err := os.Stat(sdir)
		return os.IsNotExist(err)
	})
}

// What a replica in a namespace is let out to: the manager's endpoint and
// the loopback URLs of the manager's own variables, once per port.
func TestReachable(t *testing.T) {
	env := []contract.KV{
		{Key: "FLYTE_AWS_ENDPOINT", Value: "http://localhost:9000"},
		{Key: "OTHER", Value: "http://127.0.0.1:8090/x"},
		{Key: "REMOTE", Value: "https://s3.example.com:443"},
		{Key: "SECRETISH", Value: "not a url"},
	}
	got := reachable("example.internal:8090", env)
	want := []string{"example.internal:8090", "127.0.0.1:9000"}
	if !slices.Equal(got, want) {
		t.Errorf("reachable = %v, want %v", got, want)
	}
	if e := insideEndpoint("example.internal:8090"); e != "127.0.0.1:8090" {
		t.Errorf("insideEndpoint = %q", e)
	}
	s := spec(1, 1, "x")
	if p := appPort(s); p != DefaultAppPort {
		t.Errorf("default port %d", p)
	}
	s.GetContainer().Ports = []*core.ContainerPort{{ContainerPort: 9000}}
	if p := appPort(s); p != 9000 {
		t.Errorf("the spec's port: %d", p)
	}
}

// Looking up an app's secrets reads the database: the runtime's lock is
// let go meanwhile, so that a slow lookup holds up neither the proxy nor a
// change of the app, and a replica of what the app was before the change
// is not started.
func TestSecretsLookupHoldsNothingUp(t *testing.T) {
	// The lookup waits for the test alone, not for its own timeout.
	old := secretsTimeout
	secretsTimeout = 10 * time.Minute
	t.Cleanup(func() { secretsTimeout = old })
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	h := newHarness(t, func(c *Config) {
		c.Secrets = func(ctx context.Context, _ appruntime.Key, _ []string) (map[string][]byte, error) {
			select {
			case asked <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return map[string][]byte{"greeting": []byte("s3cr3t")}, nil
		}
	})
	s := spec(1, 1, "python", "-c", server)
	s.SecurityContext = &pb.SecurityContext{Secrets: []*core.Secret{{Key: "greeting", EnvVar: "GREETING"}}}
	h.rt.Apply(appruntime.Target{Key: key, Revision: 1, Spec: s})
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the app's secrets were never looked up")
	}
	// While the lookup waits, a new revision (no secrets) is taken: Apply
	// needs the runtime's lock, as the proxy does.
	applied := make(chan struct{})
	go func() {
		h.rt.Apply(appruntime.Target{Key: key, Revision: 2, Spec: spec(1, 1, "python", "-c", server)})
		close(applied)
	}()
	select {
	case <-applied:
	case <-time.After(2 * time.Minute):
		t.Error("Apply waited for the secrets lookup")
	}
	close(release)
	<-applied
	h.waitStatus(t, pb.Status_DEPLOYMENT_STATUS_ACTIVE, pb.Status_RUNNING)
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	for _, rep := range h.rt.apps[key].replicas {
		if rep.revision != 2 {
			t.Errorf("replica %s of revision %d runs; the app is at revision 2", rep.name, rep.revision)
		}
	}
}
