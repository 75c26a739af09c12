package main

// Fuzzing every procedure the manager serves, through the real server, the
// real database (SQLite, or PostgreSQL) and the real file blob store.
//
// Two fuzz targets share one harness (fuzzManager):
//
//   - FuzzProcedureWire feeds (procedure, wire bytes): the bytes are decoded
//     with proto.Unmarshal into the procedure's request type, so the mutator
//     can reach every field of every request type.
//   - FuzzProcedureGenerated feeds (procedure, entropy): the entropy drives a
//     descriptor-driven generator (fuzz_gen_test.go) that starts from the
//     procedure's valid request and fills fields with boundary values, so
//     requests get past parsing into semantic validation.
//
// A procedure name the mutator garbled still picks a procedure (by hash), so
// no input is wasted. The properties checked for every request:
//
//   - no panic and no Internal or Unknown answer, neither seen by the client
//     nor logged by the server for a stream the client cancelled;
//   - a rejected request changes nothing: a digest of every table's rows and
//     every file under the data directory (fuzz_observe_test.go) is the same
//     before and after.
//
// The seed corpus (testdata/fuzz, written from fuzz_seed_test.go) holds a
// valid request of every procedure and known-bad ones, so plain `go test`
// runs each procedure's happy path. TestFuzzProcedures, on SQLite and on
// PostgreSQL, checks the code each of those answers, then sends FM_FUZZ_N
// generated requests (default 300) and prints the requests tried and the
// codes seen per procedure.
//
// Long runs (opt-in; one target per run):
//
//	go test ./manager -run '^$' -fuzz '^FuzzProcedureGenerated$' -fuzztime 10m
//	go test ./manager -run '^$' -fuzz '^FuzzProcedureWire$' -fuzztime 10m
//	FM_FUZZ_N=20000 FM_FUZZ_SEED=2 go test ./manager -run TestFuzzProcedures -v

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"gorm.io/gorm"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/server"
	"fmgr.dev/manager/compose"
)

// streamWait is how long a server stream may take to send its first message
// before the client cancels it. A stream that legitimately waits (a watch
// with nothing to report yet) is then counted as "waiting", never as a
// failure, so a slow machine can only make the figures less precise.
const streamWait = 3 * time.Second

// codeWaiting is the outcome of a stream the client cancelled.
const codeWaiting = "waiting"

// callTimeout bounds one request, so that a handler that hangs fails the
// test with the request that hung instead of stalling it.
const callTimeout = 2 * time.Minute

// fuzzProc is one served procedure and a client for it built from its
// descriptor.
type fuzzProc struct {
	name   string // "flyteidl2.workflow.RunService/CreateRun"
	method protoreflect.MethodDescriptor
	client *connect.Client[dynamicpb.Message, dynamicpb.Message]
}

// fuzzManager is a manager built like `flyte-manager start` builds it,
// serving on a loopback port, without its executor.
type fuzzManager struct {
	home     string
	postgres bool
	blobsURL string // the storage root blobsPlaceholder stands for
	db       *gorm.DB
	procs    []*fuzzProc
	byName   map[string]*fuzzProc
	log      *serverLog

	mu     sync.Mutex // serializes requests: the digest compares one request's effect
	digest *stateDigest
	nextID int
}

// startFuzzManager starts the manager for tb and stops it when tb ends.
//
// The background workers run except the executor: the fuzzer sends valid
// task specs whose containers name any command, and the executor would run
// them; it would also change the database on its own, which defeats the
// digest comparison. Accepted runs therefore stay queued.
func startFuzzManager(tb testing.TB, database string) *fuzzManager {
	tb.Helper()
	home := filepath.Join(tb.TempDir(), "home")
	dsn := "sqlite://" + filepath.ToSlash(filepath.Join(home, "flyte-manager.db"))
	switch database {
	case "sqlite":
	case "postgres":
		dsn = pgtest.NewDatabase(tb)
	default:
		tb.Fatalf("database %q: want sqlite or postgres", database)
	}
	cfg, err := config.Load(config.Sources{Overrides: map[string]any{
		"home":         home,
		"server.host":  "127.0.0.1",
		"server.port":  0,
		"database.dsn": dsn,
		"storage.url":  "file://" + filepath.ToSlash(filepath.Join(home, "blobs")),
	}})
	if err != nil {
		tb.Fatal(err)
	}
	if err := cfg.Prepare(); err != nil {
		tb.Fatal(err)
	}
	slog := &serverLog{internal: map[string]string{}, finished: map[string]string{}}
	logger := slogLogger(slog)
	srv := server.New(cfg.Server, logger)
	ctx, cancel := context.WithCancel(context.Background())
	gdb, err := compose.OpenDatabase(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv.AddCloser("database", func(context.Context) error { return db.Close(gdb) })
	if err := db.Migrate(ctx, gdb); err != nil {
		tb.Fatal(err)
	}
	d := &compose.Deps{Config: cfg, DB: gdb, Log: logger, Server: srv}
	if err := compose.Setup(ctx, d); err != nil {
		tb.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		tb.Fatal(err)
	}
	if !srv.DropWorker("executor") {
		tb.Fatal(`no worker named "executor": the fuzz harness must not run task processes; update startFuzzManager`)
	}
	if !srv.DropWorker(compose.AppReplicasWorker) {
		tb.Fatal(`no worker runs app replicas: the fuzz harness must not run apps' commands; update startFuzzManager`)
	}
	srv.StartWorkers()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})

	m := &fuzzManager{home: home, postgres: database == "postgres", blobsURL: cfg.Storage.URL, db: gdb, log: slog, byName: map[string]*fuzzProc{}}
	base := "http://" + srv.Addr().String()
	httpClient := h2cClient()
	tb.Cleanup(httpClient.CloseIdleConnections)
	for _, name := range srv.Services() {
		desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			tb.Fatalf("served service %s has no registered descriptor: %v", name, err)
		}
		sd, ok := desc.(protoreflect.ServiceDescriptor)
		if !ok {
			tb.Fatalf("%s is not a service", name)
		}
		for i := range sd.Methods().Len() {
			md := sd.Methods().Get(i)
			p := &fuzzProc{name: name + "/" + string(md.Name()), method: md}
			p.client = connect.NewClient[dynamicpb.Message, dynamicpb.Message](httpClient, base+"/"+p.name,
				connect.WithSchema(md), connect.WithResponseInitializer(initDynamic))
			m.procs = append(m.procs, p)
			m.byName[p.name] = p
		}
	}
	slices.SortFunc(m.procs, func(a, b *fuzzProc) int { return strings.Compare(a.name, b.name) })
	if err := m.seedFixture(ctx); err != nil {
		tb.Fatal(err)
	}
	if m.digest, err = m.takeDigest(ctx); err != nil {
		tb.Fatal(err)
	}
	return m
}

// h2cClient speaks HTTP/2 without TLS, as the SDK does, so bidirectional
// streams work too.
func h2cClient() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &protocols}}
}

// initDynamic makes the client decode responses into the method's output type.
func initDynamic(spec connect.Spec, msg any) error {
	dyn, ok := msg.(*dynamicpb.Message)
	md, ok2 := spec.Schema.(protoreflect.MethodDescriptor)
	if !ok || !ok2 {
		return fmt.Errorf("unexpected message %T or schema %T", msg, spec.Schema)
	}
	if spec.IsClient {
		*dyn = *dynamicpb.NewMessage(md.Output())
	} else {
		*dyn = *dynamicpb.NewMessage(md.Input())
	}
	return nil
}

// pick returns the procedure named, or for a name that is none (a mutated
// one) the procedure its hash selects.
func (m *fuzzManager) pick(name string) *fuzzProc {
	if p := m.byName[name]; p != nil {
		return p
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return m.procs[int(h.Sum32()%uint32(len(m.procs)))]
}

// outcome is what one request did.
type outcome struct {
	code     string // "ok", a Connect code, or codeWaiting
	message  string // the error's message, for the report
	failures []string
}

// exercise sends req to p and checks the properties; it returns the outcome
// with every property violated listed in failures.
func (m *fuzzManager) exercise(p *fuzzProc, req *dynamicpb.Message) outcome {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	id := fmt.Sprintf("fuzz-%d", m.nextID)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var out outcome
	out.code, out.message = m.call(ctx, p, req, id)
	if ctx.Err() != nil {
		out.failures = append(out.failures, fmt.Sprintf("no answer within %s", callTimeout))
	}
	if out.code == codeWaiting {
		// The handler ends when it sees the cancellation; wait for the
		// server to log the call, so anything it logs is attributed here.
		if !m.log.waitFinished(id, 2*time.Minute) {
			out.failures = append(out.failures, "the server did not finish the stream within 2m of the client cancelling it")
		}
	}
	switch out.code {
	case connect.CodeInternal.String(), connect.CodeUnknown.String():
		out.failures = append(out.failures, fmt.Sprintf("answered %s: %s", out.code, out.message))
	}
	if text, ok := m.log.internalError(id); ok {
		out.failures = append(out.failures, "server logged an internal error: "+firstLine(text, 400))
	}
	after, err := m.takeDigest(ctx)
	if err != nil {
		out.failures = append(out.failures, "digest: "+err.Error())
		return out
	}
	if out.code != "ok" {
		if diff := diffDigest(m.digest, after); diff != "" {
			out.failures = append(out.failures, "a rejected request changed state: "+diff)
		}
	}
	m.digest = after
	return out
}

// call sends one request and returns its code.
func (m *fuzzManager) call(ctx context.Context, p *fuzzProc, req *dynamicpb.Message, id string) (code, message string) {
	result := func(err error) (string, string) {
		if err == nil {
			return "ok", ""
		}
		return connect.CodeOf(err).String(), connectMessage(err)
	}
	switch {
	case p.method.IsStreamingClient() && p.method.IsStreamingServer():
		wait, cancel := context.WithTimeout(ctx, streamWait)
		defer cancel()
		s := p.client.CallBidiStream(wait)
		s.RequestHeader().Set(server.RequestIDHeader, id)
		if err := s.Send(req); err == nil {
			_ = s.CloseRequest()
		}
		_, err := s.Receive()
		_ = s.CloseResponse()
		if wait.Err() != nil && ctx.Err() == nil {
			return codeWaiting, ""
		}
		if err != nil && connectMessage(err) == "EOF" {
			err = nil
		}
		return result(err)
	case p.method.IsStreamingClient():
		s := p.client.CallClientStream(ctx)
		s.RequestHeader().Set(server.RequestIDHeader, id)
		_ = s.Send(req)
		_, err := s.CloseAndReceive()
		return result(err)
	case p.method.IsStreamingServer():
		wait, cancel := context.WithTimeout(ctx, streamWait)
		defer cancel()
		r := connect.NewRequest(req)
		r.Header().Set(server.RequestIDHeader, id)
		s, err := p.client.CallServerStream(wait, r)
		if err != nil {
			return result(err)
		}
		defer s.Close()
		if s.Receive() {
			return "ok", ""
		}
		if wait.Err() != nil && ctx.Err() == nil {
			return codeWaiting, ""
		}
		return result(s.Err())
	default:
		r := connect.NewRequest(req)
		r.Header().Set(server.RequestIDHeader, id)
		_, err := p.client.CallUnary(ctx, r)
		return result(err)
	}
}

func connectMessage(err error) string {
	if ce, ok := err.(*connect.Error); ok {
		return ce.Message()
	}
	return err.Error()
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// describe renders req for a failure report (protojson, bounded).
func describe(p *fuzzProc, req *dynamicpb.Message) string {
	js, err := protojson.Marshal(req)
	if err != nil {
		js = []byte(err.Error())
	}
	wire, _ := proto.Marshal(req)
	s := string(js)
	if len(s) > 2000 {
		s = s[:2000] + "...(truncated)"
	}
	return fmt.Sprintf("%s %s (wire %d bytes)", p.name, s, len(wire))
}

// FuzzProcedureWire decodes body as the wire form of the request of the
// procedure named (or picked by hash).
func FuzzProcedureWire(f *testing.F) {
	m := startFuzzManager(f, fuzzDatabase())
	f.Fuzz(func(t *testing.T, procedure string, body []byte) {
		p := m.pick(procedure)
		msg := dynamicpb.NewMessage(p.method.Input())
		if err := proto.Unmarshal(body, msg); err != nil {
			return // not a request of this type: the server's decoder is connect's, not ours
		}
		m.expand(msg)
		m.check(t, p, msg)
	})
}

// FuzzProcedureGenerated turns entropy into boundary mutations of the
// procedure's valid request (fuzz_gen_test.go).
func FuzzProcedureGenerated(f *testing.F) {
	m := startFuzzManager(f, fuzzDatabase())
	templates := m.templates(f)
	f.Fuzz(func(t *testing.T, procedure string, choices []byte) {
		p := m.pick(procedure)
		msg := generate(templates[p.name], &entropy{b: choices})
		m.expand(msg)
		m.check(t, p, msg)
	})
}

// check exercises one fuzz input and fails t on any violated property.
func (m *fuzzManager) check(t *testing.T, p *fuzzProc, msg *dynamicpb.Message) {
	if _, err := proto.Marshal(msg); err != nil {
		return // the client could not send it
	}
	out := m.exercise(p, msg)
	for _, f := range out.failures {
		t.Errorf("%s\n  request: %s", f, describe(p, msg))
	}
}

// templates parses every procedure's valid request; tb fails when a served
// procedure has none or a seed names a procedure not served.
func (m *fuzzManager) templates(tb testing.TB) map[string]*dynamicpb.Message {
	tb.Helper()
	out := map[string]*dynamicpb.Message{}
	for _, p := range m.procs {
		s, ok := seeds[p.name]
		if !ok {
			tb.Errorf("served procedure %s has no seed request in fuzz_seed_test.go", p.name)
			continue
		}
		msg, err := parseRequest(p, s.request)
		if err != nil {
			tb.Fatal(err)
		}
		out[p.name] = msg
	}
	for name := range seeds {
		if m.byName[name] == nil {
			tb.Errorf("seed for %s, which the manager does not serve", name)
		}
	}
	return out
}

// TestFuzzProcedures sends every procedure's valid request, then FM_FUZZ_N
// generated ones (default 300; FM_FUZZ_SEED picks the sequence), and
// prints the requests tried and the codes seen per procedure.
func TestFuzzProcedures(t *testing.T) {
	n := envInt(t, "FM_FUZZ_N", 300)
	seed := envInt(t, "FM_FUZZ_SEED", 1)
	for _, database := range []string{"sqlite", "postgres"} {
		t.Run(database, func(t *testing.T) { fuzzBatch(t, database, n, seed) })
	}
}

// fuzzDatabase is the database the fuzz targets use: FM_FUZZ_DATABASE,
// sqlite by default (the fuzzing engine runs every input on one).
func fuzzDatabase() string {
	if d := os.Getenv("FM_FUZZ_DATABASE"); d != "" {
		return d
	}
	return "sqlite"
}

// TestMain lets the harness use pgtest's PostgreSQL.
func TestMain(m *testing.M) { pgtest.Main(m) }

func fuzzBatch(t *testing.T, database string, n, seed int) {
	m := startFuzzManager(t, database)
	templates := m.templates(t)
	codes := map[string]map[string]int{}
	reported := 0
	record := func(p *fuzzProc, msg *dynamicpb.Message, out outcome) {
		if codes[p.name] == nil {
			codes[p.name] = map[string]int{}
		}
		codes[p.name][out.code]++
		for _, f := range out.failures {
			if reported++; reported <= 30 {
				t.Errorf("%s\n  request: %s", f, describe(p, msg))
			}
		}
	}

	for _, p := range m.procs {
		msg := proto.Clone(templates[p.name]).(*dynamicpb.Message)
		m.expand(msg)
		out := m.exercise(p, msg)
		if want := seeds[p.name].want; out.code != want {
			t.Errorf("%s: the seed request answered %s (%s), want %s", p.name, out.code, out.message, want)
		}
		record(p, msg, out)
	}

	for _, b := range badSeeds {
		p := m.byName[b.procedure]
		msg, err := parseBad(p, b.request, b.wire)
		if err != nil {
			t.Fatal(err)
		}
		m.expand(msg)
		out := m.exercise(p, msg)
		if out.code != b.want || !strings.Contains(out.message, b.wantText) {
			t.Errorf("bad seed %s: %s answered %s (%s), want %s containing %q", b.name, p.name, out.code, out.message, b.want, b.wantText)
		}
		record(p, msg, out)
	}

	// Unimplemented procedures answer before reading the request; give
	// the generated budget mostly to the others.
	var schedule []*fuzzProc
	for _, p := range m.procs {
		weight := 8
		if seeds[p.name].want == "unimplemented" {
			weight = 1
		}
		for range weight {
			schedule = append(schedule, p)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	sent := 0
	for i := range n {
		p := schedule[i%len(schedule)]
		choices := make([]byte, 4+rng.IntN(60))
		for j := range choices {
			choices[j] = byte(rng.Uint32())
		}
		msg := generate(templates[p.name], &entropy{b: choices})
		m.expand(msg)
		if _, err := proto.Marshal(msg); err != nil {
			t.Fatalf("generated an unsendable request: %v", err)
		}
		record(p, msg, m.exercise(p, msg))
		sent++
	}
	if reported > 30 {
		t.Errorf("... and %d more failures", reported-30)
	}
	t.Logf("fuzz on %s: %d seed requests + %d known-bad + %d generated (FM_FUZZ_N=%d FM_FUZZ_SEED=%d) over %d procedures, every one served; "+
		"not a procedure, so not here: the signed-URL blob route; the executor does not run (accepted runs stay queued); "+
		"%q = a stream that sent nothing within %s and was cancelled by the client\n%s",
		database, len(m.procs), len(badSeeds), sent, n, seed, len(m.procs), codeWaiting, streamWait, codeTable(m.procs, codes))
}

// codeTable renders codes seen per procedure.
func codeTable(procs []*fuzzProc, codes map[string]map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-70s %6s  %s\n", "procedure", "tried", "codes seen")
	total := map[string]int{}
	for _, p := range procs {
		var parts []string
		tried := 0
		for _, c := range slices.Sorted(maps.Keys(codes[p.name])) {
			parts = append(parts, fmt.Sprintf("%s=%d", c, codes[p.name][c]))
			tried += codes[p.name][c]
			total[c] += codes[p.name][c]
		}
		fmt.Fprintf(&b, "%-70s %6d  %s\n", p.name, tried, strings.Join(parts, " "))
	}
	var parts []string
	sum := 0
	for _, c := range slices.Sorted(maps.Keys(total)) {
		parts = append(parts, fmt.Sprintf("%s=%d", c, total[c]))
		sum += total[c]
	}
	fmt.Fprintf(&b, "%-70s %6d  %s\n", "all", sum, strings.Join(parts, " "))
	return b.String()
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}
