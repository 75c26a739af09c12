// Package e2e drives a real flyte-manager process with real clients: the
// official flyteidl2 Python clients and the flyte SDK from the project's
// virtualenv, generated Go clients, and plain HTTP.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/s3test"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/testkit"
)

var managerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fm-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	managerBin, err = mgrproc.Build(context.Background(), filepath.Join(dir, "flyte-manager"))
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "building flyte-manager:", err)
		os.Exit(1)
	}
	// The binary is over 200 MB: each run that left it behind filled the
	// shared disk a little more (a CI run once died of it).
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// backend names a database the manager can run on.
type backend struct {
	name string
	dsn  func(t testing.TB) string
}

// backends are the two databases every end-to-end scenario runs on, each a
// fresh database as dbtest makes them. (Not dbtest.EachDSN itself: the
// crash matrix picks cells per database.)
var backends = []backend{
	{"sqlite", dbtest.SQLiteDSN},
	{"postgres", pgtest.NewDatabase},
}

// manager is one running flyte-manager process (a mgrproc.Process) seen
// from a test: failures to start end the test, and the fields follow the
// process across restarts.
type manager struct {
	URL  string // http://127.0.0.1:<port>
	Home string
	DSN  string
	// Kubernetes says the manager runs the kubernetes executor
	// (startKubeManager): its attempts' logs come from the cluster.
	Kubernetes bool
	// Kubeconfig is then the test cluster's kubeconfig.
	Kubeconfig string
	// S3 is the S3 server the manager stores its blobs on
	// (startSDKManagerOnS3); nil for the home's file storage.
	S3 *s3test.Server

	t      *testing.T
	proc   *mgrproc.Process
	output *testkit.Buffer // what the manager printed since it last started
}

// startManager runs `flyte-manager start` on a fresh home and dsn, waits
// until it is ready, and stops it when the test ends.
func startManager(t *testing.T, dsn string, env ...string) *manager {
	t.Helper()
	return startManagerAs(t, managerBin, dsn, env...)
}

// pathLocations makes a manager give tasks paths rather than s3:// locations
// through its S3 endpoint: for the tests whose tasks are shell commands that
// write their outputs to {{.outputPrefix}} as a directory.
const pathLocations = "FLYTE_MANAGER_STORAGE_S3ENDPOINT_TASKLOCATIONS=file"

// startManagerAs is startManager with another build of the manager.
func startManagerAs(t *testing.T, bin, dsn string, env ...string) *manager {
	t.Helper()
	return startManagerWith(t, mgrproc.Options{Bin: bin, DSN: dsn, Env: env})
}

// startManagerWith is startManager with o (its Home a new temporary
// directory when empty).
func startManagerWith(t *testing.T, o mgrproc.Options) *manager {
	t.Helper()
	if o.Home == "" {
		// Attempts run as users of their own (executor.local.runAs): they
		// must pass through the home to their directories under it.
		o.Home = testkit.TaskDir(t)
	}
	o.Config = append(o.Config, queuesConfigFile(t), localLogLinksConfig(t)) // the queues and loglinks scenarios'
	loadTestImages(t, o.Home)
	m := &manager{Home: o.Home, DSN: o.DSN, t: t}
	p, err := mgrproc.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	m.proc = p
	m.sync()
	t.Cleanup(m.Stop)
	return m
}

// ClientEnv is what an SDK client needs besides its config to read the
// manager's blobs itself (File.download of an output): the store's
// endpoint and credentials on S3, the manager's S3 endpoint and its key
// when tasks get its s3 locations, none when they get file paths.
func (m *manager) ClientEnv() []string {
	if m.S3 != nil {
		return m.S3.ClientEnv()
	}
	env, err := m.proc.S3ClientEnv()
	if err != nil {
		m.t.Fatal(err)
	}
	return env
}

// S3Locations says the manager's tasks get s3:// locations through its S3
// endpoint (storage.s3Endpoint, the default with file storage and the local
// executor).
func (m *manager) S3Locations() bool {
	return m.S3 == nil && m.proc.S3TaskLocations
}

// blobPath is the file in the manager's file storage (<home>/blobs) that
// uri names: a path, a file:// URL, or s3://flyte/<key> through its S3
// endpoint.
func (m *manager) blobPath(uri string) string {
	if key, ok := strings.CutPrefix(uri, "s3://flyte/"); ok && m.S3 == nil {
		return filepath.Join(m.Home, "blobs", filepath.FromSlash(key))
	}
	return strings.TrimPrefix(uri, "file://")
}

func (m *manager) sync() { m.URL, m.output = m.proc.URL, m.proc.Buffer() }

// Stop asks the manager to shut down gracefully and waits for it.
func (m *manager) Stop() {
	if err := m.proc.Stop(); err != nil && !m.t.Failed() {
		m.t.Logf("flyte-manager stopped with %v", err)
	}
	if m.t.Failed() {
		// The tail: a manager shared by many scenarios prints far more
		// than what explains a failure, which its test's messages (above) say.
		m.t.Logf("flyte-manager output:\n%s", m.output.Tail(400))
	}
}

// Kill ends the manager with SIGKILL, as a crash would, and waits until it
// is gone.
func (m *manager) Kill() { m.proc.Kill() }

// Restart starts the manager again on the same home and database (stopping
// it first if it still runs) with env added to the first start's.
func (m *manager) Restart(env ...string) {
	m.t.Helper()
	if err := m.proc.Restart(context.Background(), env...); err != nil {
		m.t.Fatal(err)
	}
	m.sync()
}

// RestartAs restarts the manager as bin with env instead of the first
// start's environment.
func (m *manager) RestartAs(bin string, env ...string) {
	m.t.Helper()
	if err := m.proc.RestartAs(context.Background(), bin, env...); err != nil {
		m.t.Fatal(err)
	}
	m.sync()
}

// Signal sends sig to the running manager (e.g. SIGSTOP to freeze it).
func (m *manager) Signal(sig os.Signal) error { return m.proc.Signal(sig) }

// PID is the manager process's id.
func (m *manager) PID() int { return m.proc.PID() }

// Endpoint is the host:port form the SDK is configured with.
func (m *manager) Endpoint() string { return m.proc.Endpoint() }

// metrics returns the manager's Prometheus exposition text.
func (m *manager) metrics() string {
	m.t.Helper()
	resp, err := mgrproc.HTTPClient.Get(m.URL + "/metrics")
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		m.t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// rpcClient is the HTTP client for Connect clients of unary calls: it gives
// up on a call that hangs (streams must not use it, their length is theirs).
var rpcClient = mgrproc.HTTPClient

// venv is the project's virtualenv with the pinned flyte SDK (sdktest.Venv).
func venv(t *testing.T) string { return sdktest.Venv(t) }

// python runs a script from testdata with the virtualenv's interpreter and
// returns its stdout; a non-zero exit fails the test with its output.
func python(t *testing.T, ctx context.Context, env []string, script string, args ...string) string {
	t.Helper()
	dir := venv(t)
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "bin", "python"), append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"), "FLYTE_DISABLE_SENTRY=true"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python %s %v: %v\nstdout:\n%s\nstderr:\n%s", script, args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
