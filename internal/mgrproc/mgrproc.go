// Package mgrproc runs a flyte-manager binary as a child process for tests
// and the bench: build it, start it on a home and database, wait until it is
// really ready, and stop, kill or restart it. It is the one place that knows
// how to tell that a manager came up (its "serving on" banner, then /readyz
// answering 200) so the end-to-end tests, the bench, the manager's own
// tests and the executor's dev-loop test agree on it.
//
//	bin, err := mgrproc.Build(ctx, filepath.Join(dir, "flyte-manager"))
//	p, err := mgrproc.Start(ctx, mgrproc.Options{Bin: bin, Home: home, DSN: dsn})
//	defer p.Stop()
//	resp, err := mgrproc.HTTPClient.Get(p.URL + "/metrics")
package mgrproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/s3serve"
	"fmgr.dev/internal/testkit"
)

// Deadlines are generous on purpose: the machines that run the suites are
// often loaded, and a manager that needs long to start is not a failure of
// the test that started it.
const (
	// DefaultStartTimeout bounds the banner plus the first 200 from /readyz.
	DefaultStartTimeout = 2 * time.Minute
	// stopTimeout is how long Stop waits after SIGTERM before it kills.
	stopTimeout = 90 * time.Second
)

// HTTPClient is the client harnesses use for the manager's plain HTTP
// endpoints (/readyz, /metrics, ...): unlike http.DefaultClient it gives up
// on a manager that stopped answering.
// A manager started by a test with server.tls has a certificate the test
// generated; these loopback checks do not verify it.
var HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test helper, loopback only
}}

// Build compiles fmgr.dev/manager into out with extra `go build` arguments
// (such as "-tags", "bench" or "-ldflags", ...) and returns out. It must run
// inside the fmgr.dev module (tests run in their package's directory).
func Build(ctx context.Context, out string, args ...string) (string, error) {
	argv := append(append([]string{"build"}, args...), "-o", out, "fmgr.dev/manager")
	cmd := exec.CommandContext(ctx, "go", argv...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(argv, " "), err, output.String())
	}
	return out, nil
}

// Options says what to start.
type Options struct {
	Bin  string   // the flyte-manager binary
	Home string   // --home
	DSN  string   // --db; "" for the home's SQLite database
	Env  []string // added to this process's environment
	// Config are configuration files, each passed with --config.
	Config []string
	// Port is the port to listen on, the same at every (re)start; 0 takes
	// a free one each time. A fixed port is for tests whose task processes
	// outlive a restart and keep the manager's address (Pods).
	Port int
	// Log, if set, also receives everything the manager prints (stdout and
	// stderr), e.g. a log file to keep.
	Log io.Writer
	// StartTimeout bounds the start; DefaultStartTimeout if 0.
	StartTimeout time.Duration
	// Args, if set, is the whole command line after Bin instead of `start`
	// with Home, DSN, Config and Port: for another binary that composes the
	// manager and prints its banner (executor/cmd/manager).
	Args []string
}

// Process is one running `flyte-manager start`.
type Process struct {
	URL string // http://127.0.0.1:<port>, from the banner
	// KubeURL is the Kubernetes-style API's https://host:port from the
	// banner, "" when it is not served.
	KubeURL string
	// S3URL is the S3 endpoint's http://host:port from the banner, "" when
	// it is not served; S3TaskLocations says tasks get s3 locations
	// through it (storage.s3Endpoint.taskLocations).
	S3URL           string
	S3TaskLocations bool

	opts   Options
	cmd    *exec.Cmd
	output *testkit.Buffer
	done   chan struct{} // closed when the process has exited and been reaped
	err    error         // the process's exit status, once done is closed
}

// servingLine is the banner's first line (manager/compose printBanner).
var servingLine = regexp.MustCompile(`serving on (https?://\S+)`)

// kubeLine is the banner's address of the Kubernetes-style API.
var kubeLine = regexp.MustCompile(`kubectl \(taskactions[^\n]*\n\s+(https://\S+)`)

// s3Line is the banner's address of the S3 endpoint.
// The first group is set when tasks get s3 locations through it.
var s3Line = regexp.MustCompile(`S3 endpoint \(bucket [^;)\n]*(; tasks get s3://)?[^\n]*\n\s+(http://\S+)`)

// ServingURL returns the base URL a manager's banner in text announces, or
// "" when there is none yet.
func ServingURL(text string) string {
	if m := servingLine.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

// Start runs `flyte-manager start` with o (on o.Port, else a free port), or
// Bin with o.Args, and returns once the manager printed its address and
// /readyz answered 200. A manager that exits or does not get ready in time
// is an error carrying its output (and is killed in the second case).
func Start(ctx context.Context, o Options) (*Process, error) {
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	p := &Process{opts: o}
	if err := p.start(ctx, nil); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Process) start(ctx context.Context, env []string) error {
	args := []string{"start", "--home", p.opts.Home, "--port", strconv.Itoa(p.opts.Port)}
	if p.opts.DSN != "" {
		args = append(args, "--db", p.opts.DSN)
	}
	for _, f := range p.opts.Config {
		args = append(args, "--config", f)
	}
	if p.opts.Args != nil {
		args = p.opts.Args
	}
	p.output = &testkit.Buffer{}
	var out io.Writer = p.output
	if p.opts.Log != nil {
		out = io.MultiWriter(p.output, p.opts.Log)
	}
	p.cmd = exec.Command(p.opts.Bin, args...)
	// The Kubernetes-style API and the S3 endpoint take free ports unless
	// the test says otherwise: managers of concurrent tests would all want
	// 8091 and 8092.
	// A restart keeps the S3 endpoint's address, as a manager's configured
	// one stays: attempts that outlive the manager reach it there.
	s3Listen := "127.0.0.1:0"
	if u, ok := strings.CutPrefix(p.S3URL, "http://"); ok {
		s3Listen = u
	}
	p.cmd.Env = append(append(append(os.Environ(), "FLYTE_MANAGER_KUBEAPI_LISTEN=127.0.0.1:0", "FLYTE_MANAGER_STORAGE_S3ENDPOINT_LISTEN="+s3Listen), p.opts.Env...), env...)
	// One writer for both streams: exec then copies them through one pipe,
	// in the order the manager wrote them.
	p.cmd.Stdout, p.cmd.Stderr = out, out
	// A process that inherited the manager's output (a task left behind by
	// a crash) must not keep Wait from returning once the manager is gone.
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.opts.Bin, err)
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()

	ctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	if err := p.waitReady(ctx); err != nil {
		p.Kill()
		return err
	}
	return nil
}

// waitReady waits for the banner, then for /readyz to answer 200: the
// banner comes when the listener is bound, readiness when the database and
// the executor's first scan of unfinished work are done.
func (p *Process) waitReady(ctx context.Context) error {
	select {
	case <-p.output.Await(ServingURL):
		p.URL = ServingURL(p.output.String())
	case <-p.done:
		return fmt.Errorf("flyte-manager exited (%v) before serving:\n%s", p.err, p.output)
	case <-ctx.Done():
		return fmt.Errorf("flyte-manager did not print its address within %s:\n%s", p.opts.StartTimeout, p.output)
	}
	var last string
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		status, body, err := p.get(ctx, "/readyz")
		switch {
		case err == nil && status == http.StatusOK:
			if m := kubeLine.FindStringSubmatch(p.output.String()); m != nil {
				p.KubeURL = m[1]
			}
			if m := s3Line.FindStringSubmatch(p.output.String()); m != nil {
				p.S3URL, p.S3TaskLocations = m[2], m[1] != ""
			}
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("%d %s", status, strings.TrimSpace(body))
		}
		select {
		case <-p.done:
			return fmt.Errorf("flyte-manager exited (%v) before it was ready (last /readyz: %s):\n%s", p.err, last, p.output)
		case <-ctx.Done():
			return fmt.Errorf("flyte-manager was not ready within %s (last /readyz: %s):\n%s", p.opts.StartTimeout, last, p.output)
		case <-time.After(wait):
		}
	}
}

func (p *Process) get(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}

// Endpoint is the manager's host:port.
func (p *Process) Endpoint() string {
	return strings.TrimPrefix(strings.TrimPrefix(p.URL, "http://"), "https://")
}

// Output is everything the manager printed since it last started.
func (p *Process) Output() string { return p.output.String() }

// Buffer is what the manager printed since it last started; it may be read
// while the manager writes.
func (p *Process) Buffer() *testkit.Buffer { return p.output }

// Exited is closed once the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Running reports whether the process was started and has not ended.
func (p *Process) Running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// PID is the process id of the manager's current run (0 before Start).
func (p *Process) PID() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Signal sends sig to the running manager (SIGSTOP to freeze it, for
// instance); it fails once the process has ended.
func (p *Process) Signal(sig os.Signal) error {
	if !p.Running() {
		return errors.New("flyte-manager is not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Stop asks the manager to shut down (SIGTERM) and waits for it; after
// stopTimeout it kills it. It returns the exit status (nil for a clean
// exit) and may be called on a stopped process.
func (p *Process) Stop() error {
	if !p.Running() {
		return p.exitErr()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(stopTimeout):
		p.Kill()
		return fmt.Errorf("flyte-manager did not stop within %s of SIGTERM and was killed", stopTimeout)
	}
}

// Kill ends the manager with SIGKILL, as a crash would, and waits until it
// is gone.
func (p *Process) Kill() {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Restart stops the manager if it still runs (SIGTERM) and starts it again
// on the same home and database, with the environment of Start plus env.
func (p *Process) Restart(ctx context.Context, env ...string) error {
	_ = p.Stop()
	return p.start(ctx, env)
}

// RestartAs is Restart with another binary and with env instead of Start's
// environment: a crash test starts a failpoint build armed by environment
// variables, then restarts the normal build without them.
func (p *Process) RestartAs(ctx context.Context, bin string, env ...string) error {
	_ = p.Stop()
	p.opts.Bin, p.opts.Env = bin, env
	return p.start(ctx, nil)
}

func (p *Process) exitErr() error {
	if p.done == nil {
		return errors.New("flyte-manager was never started")
	}
	return p.err
}

// S3ClientEnv is the environment through which an SDK client reaches the
// manager's S3 endpoint (its URL and the key in the manager's home), under
// the names the SDK reads; nil when the manager serves none.
func (p *Process) S3ClientEnv() ([]string, error) {
	if p.S3URL == "" {
		return nil, nil
	}
	id, secret, err := s3serve.LoadOrCreateKey(filepath.Join(p.opts.Home, s3serve.KeyFile))
	if err != nil {
		return nil, err
	}
	o := blob.S3Options{Endpoint: p.S3URL, Region: "us-east-1", AccessKeyID: id, SecretAccessKey: secret, ForcePathStyle: true}
	env, sec := o.ProcessEnv()
	var out []string
	for _, m := range []map[string]string{env, sec} {
		for k, v := range m {
			out = append(out, k+"="+v)
		}
	}
	return out, nil
}
