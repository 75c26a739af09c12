package contract

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"google.golang.org/protobuf/proto"
)

// The argv the SDK serialises for a remote run (flyte/_task.py container_args).
var sdkArgs = []string{
	"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}", "--version", "v1",
	"--raw-data-path", "{{.rawOutputDataPrefix}}", "--checkpoint-path", "{{.checkpointOutputPrefix}}",
	"--prev-checkpoint", "{{.prevCheckpointPrefix}}", "--run-name", "{{.runName}}", "--name", "{{.actionName}}",
	"--run-start-time", "{{.runStartTime}}", "--tgz", "/data/bundles/fast.tar.gz", "--dest", ".",
	"--resolver", "flyte._internal.resolvers.default.DefaultTaskResolver", "mod", "tmod", "instance", "add",
}

func TestRenderArgs(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("CET", 3600))
	v := Values{
		InputURI:               "/data/p/d/r1/inputs",
		OutputPrefix:           "/data/p/d/r1/a0/1",
		RawOutputDataPrefix:    "/data/p/d/r1/a0/1",
		CheckpointOutputPrefix: "/data/p/d/r1/a0/1/_flytecheckpoints",
		RunName:                "r1",
		ActionName:             "a0",
		RunStartTime:           start,
	}
	got := RenderArgs(sdkArgs, v)
	want := []string{
		"a0", "--inputs", "/data/p/d/r1/inputs/inputs.pb", "--outputs-path", "/data/p/d/r1/a0/1", "--version", "v1",
		"--raw-data-path", "/data/p/d/r1/a0/1", "--checkpoint-path", "/data/p/d/r1/a0/1/_flytecheckpoints",
		"--prev-checkpoint", `""`, "--run-name", "r1", "--name", "a0",
		"--run-start-time", "2026-03-04T04:06:07Z", "--tgz", "/data/bundles/fast.tar.gz", "--dest", ".",
		"--resolver", "flyte._internal.resolvers.default.DefaultTaskResolver", "mod", "tmod", "instance", "add",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rendered\n%q\nwant\n%q", got, want)
	}
	if sdkArgs[2] != "{{.input}}" {
		t.Error("RenderArgs modified its input")
	}
}

func TestRenderArgsMatching(t *testing.T) {
	v := Values{InputURI: "s3://b/r/c1/inputs.pb", OutputPrefix: "s3://b/r/c1/2", PrevCheckpointPrefix: "s3://b/r/c1/1/_flytecheckpoints"}
	cases := []struct{ in, want string }{
		{"{{.input}}", "s3://b/r/c1/inputs.pb"},
		{"{{.Input}}", "s3://b/r/c1/inputs.pb"},
		{"{{ .INPUT }}", "s3://b/r/c1/inputs.pb"},
		{"{{.inputPrefix}}", "s3://b/r/c1"},
		{"{{   .OutputPrefix}}", "s3://b/r/c1/2"},
		{"--out={{.outputprefix}}/x", "--out=s3://b/r/c1/2/x"},
		{"{{.input}}:{{.outputPrefix}}", "s3://b/r/c1/inputs.pb:s3://b/r/c1/2"},
		{"{{.prevCheckpointPrefix}}", "s3://b/r/c1/1/_flytecheckpoints"},
		// Unknown templates stay.
		{"{{.perRetryUniqueKey}}", "{{.perRetryUniqueKey}}"},
		{"{{.Inputs.x}}", "{{.Inputs.x}}"},
		{"{{input}}", "{{input}}"},
		{"{{.input", "{{.input"},
		// Empty run/action names and start time stay templates (the runtime
		// then reads RUN_NAME / ACTION_NAME, or uses the epoch).
		{"{{.runName}}", "{{.runName}}"},
		{"{{.actionName}}", "{{.actionName}}"},
		{"{{.runStartTime}}", "{{.runStartTime}}"},
		// Empty prefixes render empty, except the previous checkpoint.
		{"{{.rawOutputDataPrefix}}", ""},
		{"plain", "plain"},
	}
	for _, tc := range cases {
		if got := RenderArgs([]string{tc.in}, v)[0]; got != tc.want {
			t.Errorf("%q rendered %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := RenderArgs([]string{"{{.prevCheckpointPrefix}}"}, Values{})[0]; got != `""` {
		t.Errorf("empty previous checkpoint rendered %q", got)
	}
}

func TestLayout(t *testing.T) {
	start := time.Unix(1700000000, 0)
	v := ValuesFor("/d/r1/c1/inputs.pb", "/d/r1/", "", "r1", "c1", 3, start)
	want := Values{
		InputURI:               "/d/r1/c1/inputs.pb",
		OutputPrefix:           "/d/r1/c1/3",
		RawOutputDataPrefix:    "/d/r1/c1/3/raw",
		CheckpointOutputPrefix: "/d/r1/c1/3/_flytecheckpoints",
		PrevCheckpointPrefix:   "/d/r1/c1/2/_flytecheckpoints",
		RunName:                "r1",
		ActionName:             "c1",
		RunStartTime:           start,
	}
	if v != want {
		t.Errorf("values %+v\nwant %+v", v, want)
	}
	if first := ValuesFor("s3://b/r1/inputs", "s3://b/r1", "s3://raw/x", "r1", "a0", 1, start); first.PrevCheckpointPrefix != "" ||
		first.OutputPrefix != "s3://b/r1/a0/1" || first.RawOutputDataPrefix != "s3://raw/x" {
		t.Errorf("first attempt %+v", first)
	}
}

func kvs(pairs ...string) []*core.KeyValuePair {
	var out []*core.KeyValuePair
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, &core.KeyValuePair{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

func baseSpec() EnvSpec {
	return EnvSpec{
		Host: []string{
			"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "TMPDIR=/tmp/x",
			"FLYTECTL_CONFIG=/home/u/.flyte/config.yaml", "UCTL_CONFIG=/u.yaml", "FLYTE_API_KEY=sekrit",
			"EAGER_API_KEY=sekrit", "_UNION_EAGER_API_KEY=sekrit", "AWS_ACCESS_KEY_ID=AKIA", "AWS_SECRET_ACCESS_KEY=s",
			"AWS_PROFILE=prod", "FLYTE_ADMIN_ENDPOINT=dns:///prod:443", "_U_RUN_BASE=/elsewhere", "_F_MAX_QPS=1",
			"RANDOM_HOST_THING=1", "MY_TOOL_HOME=/opt/tool", "MY_TOOL_KEY=k", "noequals",
		},
		RunEnv:     kvs("LOG_LEVEL", "10", "SHARED", "run", "_U_RUN_BASE", "/hijack", "FLYTE_DISABLE_SENTRY", "false"),
		TaskEnv:    kvs("SHARED", "task", "TASK_ONLY", "t", "ACTION_NAME", "hijack"),
		Defaults:   []KV{{"FLYTE_AWS_ENDPOINT", "http://localhost:9000"}, {"SHARED", "default"}, {"LOG_LEVEL", "20"}},
		Project:    "p",
		Domain:     "development",
		RunName:    "r1",
		ActionName: "a0",
		Attempt:    2,
		RunBase:    "/data/p/development/r1",
		Endpoint:   "localhost:8090",
	}
}

func TestBuildEnv(t *testing.T) {
	env, err := BuildEnv(baseSpec())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		// Host basics survive.
		"PATH": "/usr/bin:/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C", "TMPDIR": "/tmp/x",
		// Contract variables.
		"_U_RUN_BASE": "/data/p/development/r1", "_U_ORG_NAME": "local",
		"FLYTE_INTERNAL_EXECUTION_PROJECT": "p", "FLYTE_INTERNAL_EXECUTION_DOMAIN": "development",
		"FLYTE_INTERNAL_EXECUTION_ID": "r1", "RUN_NAME": "r1", "ACTION_NAME": "a0", "FLYTE_ATTEMPT_NUMBER": "1",
		"_U_EP_OVERRIDE": "localhost:8090", "_U_INSECURE": "true", "_U_USE_ACTIONS": "1",
		"FSSPEC_FILE": `{"auto_mkdir": true}`, "PYTHONUNBUFFERED": "1",
		// Run env overrides defaults, task env overrides run env.
		"FLYTE_DISABLE_SENTRY": "false", "FLYTE_DISABLE_TELEMETRY": "true", "LOG_LEVEL": "10", "SHARED": "task", "TASK_ONLY": "t",
		"FLYTE_AWS_ENDPOINT": "http://localhost:9000",
	}
	got := map[string]string{}
	for _, kv := range env {
		if _, dup := got[kv.Key]; dup {
			t.Errorf("%s appears twice", kv.Key)
		}
		got[kv.Key] = kv.Value
	}
	if !reflect.DeepEqual(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected %s", k)
			}
		}
	}
	if v, ok := env.Get(EnvAttempt); !ok || v != "1" {
		t.Errorf("Get attempt: %q %v", v, ok)
	}
	environ := env.Environ()
	if len(environ) != len(env) || !strings.HasPrefix(environ[0], "PATH=") {
		t.Errorf("environ %q", environ)
	}
}

func TestBuildEnvPassThroughAndOptions(t *testing.T) {
	s := baseSpec()
	s.PassThrough = []string{"MY_TOOL_*", "AWS_PROFILE", "FLYTE_ADMIN_ENDPOINT"}
	s.Org = "acme"
	s.TLS = true
	s.TaskID = &core.Identifier{Project: "p", Domain: "development", Name: "tmod.add", Version: "v1"}
	env, err := BuildEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"MY_TOOL_HOME": "/opt/tool", "MY_TOOL_KEY": "k", "_U_ORG_NAME": "acme", "_U_INSECURE": "false",
		"FLYTE_INTERNAL_TASK_NAME": "tmod.add", "FLYTE_INTERNAL_TASK_VERSION": "v1",
		"FLYTE_INTERNAL_TASK_PROJECT": "p", "FLYTE_INTERNAL_TASK_DOMAIN": "development",
	} {
		if got, _ := env.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// Denied names stay out even when a pass-through pattern asks for them.
	for _, k := range []string{"AWS_PROFILE", "FLYTE_ADMIN_ENDPOINT", "RANDOM_HOST_THING"} {
		if _, ok := env.Get(k); ok {
			t.Errorf("%s inherited", k)
		}
	}

	s.PassThrough = []string{"*"}
	env, err = BuildEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env.Get("RANDOM_HOST_THING"); !ok {
		t.Error("* did not pass RANDOM_HOST_THING through")
	}
	for _, k := range []string{"FLYTECTL_CONFIG", "UCTL_CONFIG", "FLYTE_API_KEY", "EAGER_API_KEY", "_UNION_EAGER_API_KEY",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "FLYTE_ADMIN_ENDPOINT", "_F_MAX_QPS"} {
		if _, ok := env.Get(k); ok {
			t.Errorf("dangerous %s inherited with *", k)
		}
	}
	if v, _ := env.Get(EnvRunBase); v != "/data/p/development/r1" {
		t.Errorf("host _U_RUN_BASE leaked: %q", v)
	}
}

func TestBuildEnvRejects(t *testing.T) {
	for name, mutate := range map[string]func(*EnvSpec){
		"no project":     func(s *EnvSpec) { s.Project = "" },
		"no domain":      func(s *EnvSpec) { s.Domain = "" },
		"no run":         func(s *EnvSpec) { s.RunName = "" },
		"no action":      func(s *EnvSpec) { s.ActionName = "" },
		"no run base":    func(s *EnvSpec) { s.RunBase = "" },
		"no endpoint":    func(s *EnvSpec) { s.Endpoint = "" },
		"attempt 0":      func(s *EnvSpec) { s.Attempt = 0 },
		"empty name":     func(s *EnvSpec) { s.TaskEnv = kvs("", "x") },
		"= in name":      func(s *EnvSpec) { s.RunEnv = kvs("A=B", "x") },
		"NUL in value":   func(s *EnvSpec) { s.TaskEnv = kvs("A", "x\x00y") },
		"bad default":    func(s *EnvSpec) { s.Defaults = []KV{{"A\x00", "x"}} },
		"NUL in run env": func(s *EnvSpec) { s.RunEnv = kvs("A", "\x00") },
	} {
		s := baseSpec()
		mutate(&s)
		if _, err := BuildEnv(s); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

func TestEnvNeverShowsValues(t *testing.T) {
	s := baseSpec()
	s.Defaults = append(s.Defaults, KV{"FLYTE_AWS_SECRET_ACCESS_KEY", "topsecret"})
	env, err := BuildEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("launch", "env", env)
	for _, out := range []string{env.String(), fmt.Sprintf("%v %+v %#v %s", env, env, env, env), buf.String()} {
		if strings.Contains(out, "topsecret") {
			t.Errorf("value leaked: %s", out)
		}
		if !strings.Contains(out, "FLYTE_AWS_SECRET_ACCESS_KEY") {
			t.Errorf("name missing: %s", out)
		}
	}
}

func errorDoc(t *testing.T, code, msg string, kind core.ContainerError_Kind, origin core.ExecutionError_ErrorKind) []byte {
	t.Helper()
	b, err := proto.Marshal(&core.ErrorDocument{Error: &core.ContainerError{Code: code, Message: msg, Kind: kind, Origin: origin}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClassify(t *testing.T) {
	userRec := errorDoc(t, "ValueError", "boom", core.ContainerError_RECOVERABLE, core.ExecutionError_USER)
	userFatal := errorDoc(t, "NonRecoverableError", "no", core.ContainerError_NON_RECOVERABLE, core.ExecutionError_USER)
	sysRec := errorDoc(t, "UnionRpcError", "rpc", core.ContainerError_RECOVERABLE, core.ExecutionError_SYSTEM)
	unknown := errorDoc(t, "X", "?", core.ContainerError_RECOVERABLE, core.ExecutionError_UNKNOWN)
	tail := []string{"Traceback (most recent call last):", "AssertionError: Org is required for now"}
	cases := []struct {
		name        string
		exit        Exit
		doc         []byte
		outputs     bool
		outcome     Outcome
		kind        machine.ErrorKind
		code        string
		recoverable bool
		msgHas      string
	}{
		{"success", Exit{}, nil, true, Succeeded, 0, "", false, ""},
		{"user error, exit 0", Exit{}, userRec, false, Failed, machine.KindUser, "ValueError", true, "boom"},
		{"non-recoverable", Exit{}, userFatal, false, Failed, machine.KindUser, "NonRecoverableError", false, "no"},
		{"system origin", Exit{}, sysRec, false, Failed, machine.KindSystem, "UnionRpcError", true, "rpc"},
		{"unknown origin", Exit{}, unknown, false, Failed, machine.KindUnknown, "X", true, "?"},
		{"module load failure exits 1 with error.pb", Exit{Code: 1}, userRec, false, Failed, machine.KindUser, "ValueError", true, "boom"},
		{"error.pb beats outputs.pb", Exit{}, userRec, true, Failed, machine.KindUser, "ValueError", true, "boom"},
		{"garbage error.pb", Exit{}, []byte{0xff, 0xff, 0xff}, false, Failed, machine.KindUser, CodeBadErrorDocument, true, "cannot be read"},
		{"empty error.pb", Exit{}, []byte{}, false, Failed, machine.KindUser, CodeBadErrorDocument, true, "empty"},
		{"exit 0 without outputs", Exit{}, nil, false, Failed, machine.KindUser, CodeOutputsMissing, true, "outputs.pb"},
		{"usage error", Exit{Code: 2, StderrTail: []string{"Error: Missing option '--run-base-dir'."}}, nil, false,
			Failed, machine.KindSystem, CodeUsageError, false, "Missing option '--run-base-dir'"},
		{"crash", Exit{Code: 1, StderrTail: tail}, nil, false, Crashed, machine.KindUser, machine.CodeCrashed, true, "exited with code 1 without writing error.pb\nlast stderr lines:\nTraceback"},
		{"crash quoting both streams", Exit{Code: 1, StdoutTail: []string{"FileNotFoundError: x"}, StderrTail: []string{`  File "io.py"`}}, nil, false,
			Crashed, machine.KindUser, machine.CodeCrashed, true, "error.pb\nlast stdout lines:\nFileNotFoundError: x\nlast stderr lines:\n  File \"io.py\""},
		{"killed", Exit{Code: -1, Signal: "killed"}, nil, false, Crashed, machine.KindUser, machine.CodeCrashed, true, "killed by signal killed"},
		{"signal beats usage code", Exit{Code: 2, Signal: "interrupt"}, nil, false, Crashed, machine.KindUser, machine.CodeCrashed, true, "signal interrupt"},
		{"timed out", Exit{Signal: "terminated", TimedOut: true}, nil, false, TimedOut, 0, "", false, ""},
		{"aborted", Exit{Signal: "terminated", Aborted: true}, userRec, false, Aborted, 0, "", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Classify(tc.exit, tc.doc, tc.outputs)
			if r.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s (%+v)", r.Outcome, tc.outcome, r.Error)
			}
			if tc.code == "" {
				if r.Error != nil {
					t.Errorf("unexpected error %v", r.Error)
				}
				return
			}
			e := r.Error
			if e == nil || e.Kind != tc.kind || e.Code != tc.code || e.Recoverable != tc.recoverable || !strings.Contains(e.Message, tc.msgHas) {
				t.Errorf("error %v, want %s %s recoverable=%v containing %q", e, tc.kind, tc.code, tc.recoverable, tc.msgHas)
			}
		})
	}
}

func TestClassifyTailIsBounded(t *testing.T) {
	var lines []string
	for i := 0; i < 100; i++ {
		lines = append(lines, fmt.Sprintf("line %03d %s", i, strings.Repeat("x", 300)))
	}
	r := Classify(Exit{Code: 3, StdoutTail: lines, StderrTail: lines}, nil, false)
	if len(r.Error.Message) > 2*tailBytes+200 || strings.Count(r.Error.Message, "line 099") != 2 || strings.Contains(r.Error.Message, "line 090") {
		t.Errorf("message of %d bytes: %.200s...", len(r.Error.Message), r.Error.Message)
	}
	if r := Classify(Exit{Code: 3, StderrTail: []string{"", " "}}, nil, false); strings.Contains(r.Error.Message, "lines:") {
		t.Errorf("blank tail quoted: %q", r.Error.Message)
	}
}

func TestClassifyDir(t *testing.T) {
	dir := t.TempDir()
	r, err := ClassifyDir(dir, Exit{})
	if err != nil || r.Outcome != Failed || r.Error.Code != CodeOutputsMissing {
		t.Fatalf("empty dir: %+v %v", r, err)
	}
	if err := os.WriteFile(filepath.Join(dir, runlayout.OutputsFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := ClassifyDir(dir, Exit{}); err != nil || r.Outcome != Succeeded {
		t.Fatalf("outputs: %+v %v", r, err)
	}
	if err := os.WriteFile(filepath.Join(dir, runlayout.ErrorFile), errorDoc(t, "E", "m", core.ContainerError_NON_RECOVERABLE, core.ExecutionError_USER), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = ClassifyDir(dir, Exit{})
	if err != nil || r.Outcome != Failed || r.Document.GetCode() != "E" || r.Error.Recoverable {
		t.Fatalf("error doc: %+v %v", r, err)
	}
	if _, err := ClassifyDir(filepath.Join(dir, runlayout.OutputsFile), Exit{}); err == nil {
		t.Error("a file as output dir should be an I/O error")
	}
}

func TestResultEvents(t *testing.T) {
	cases := []struct {
		r    Result
		want machine.Event
	}{
		{Result{Outcome: Succeeded}, machine.Succeeded{Attempt: 2}},
		{Result{Outcome: TimedOut}, machine.TimedOut{Attempt: 2, Code: machine.CodeMaxRuntime}},
		{Result{Outcome: Aborted}, machine.AbortRequested{Reason: "attempt process stopped"}},
		{Result{Outcome: Crashed, Exit: Exit{Code: 9, Signal: "killed"}, Error: &machine.Error{Message: "m"}},
			machine.Crashed{Attempt: 2, ExitCode: 9, Signal: "killed", Message: "m"}},
		{Result{Outcome: Failed, Error: &machine.Error{Kind: machine.KindUser, Code: "C", Message: "m", Recoverable: true}},
			machine.Failed{Attempt: 2, Kind: machine.KindUser, Code: "C", Message: "m", Recoverable: true}},
	}
	for _, tc := range cases {
		if got := tc.r.Event(2); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: event %#v, want %#v", tc.r.Outcome, got, tc.want)
		}
	}
	// A classified failure drives the machine as the rules say.
	s := machine.State{Phase: phase.Running, Attempt: 1}
	r := Classify(Exit{}, errorDoc(t, "NonRecoverableError", "no", core.ContainerError_NON_RECOVERABLE, core.ExecutionError_USER), false)
	_, d, err := machine.Transition(s, r.Event(1), machine.Policy{MaxUserRetries: 3})
	if term, ok := d.(*machine.Terminal); err != nil || !ok || term.Phase != phase.Failed {
		t.Errorf("non-recoverable error document: %v %v", d, err)
	}
	r = Classify(Exit{Code: 2}, nil, false)
	_, d, err = machine.Transition(s, r.Event(1), machine.Policy{MaxSystemRetries: 3})
	if term, ok := d.(*machine.Terminal); err != nil || !ok || term.Phase != phase.Failed {
		t.Errorf("usage error must not be retried: %v %v", d, err)
	}
}

// A raw container knows nothing of outputs.pb: exit 0 is its success when
// it declares no outputs. A Flyte task that exits 0 without its files broke
// the contract, and a raw container that fails still failed.
func TestClassifyRawContainer(t *testing.T) {
	for _, tc := range []struct {
		name string
		exit Exit
		f    Files
		want Outcome
	}{
		{"raw, exit 0", Exit{}, Files{Raw: true}, Succeeded},
		{"raw, exit 1", Exit{Code: 1}, Files{Raw: true}, Crashed},
		{"raw with a declared output", Exit{}, Files{Raw: true, OutputNames: []string{"o0"}}, Failed},
		{"flyte task, exit 0 without files", Exit{}, Files{}, Failed},
	} {
		if got := ClassifyFiles(tc.exit, tc.f).Outcome; got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// With auth, the task's SDK authenticates by running a command that prints
// its credential (delivered as the secret EnvTaskToken), over TLS; a run's
// or task's env cannot replace the command, and a requested secret cannot
// take the credential's variable.
func TestBuildEnvAuth(t *testing.T) {
	s := baseSpec()
	s.TLS = true
	s.Auth = &TaskAuth{SkipVerify: true}
	s.RunEnv = []*core.KeyValuePair{{Key: EnvAuthCommand, Value: `["cat", "/etc/passwd"]`}, {Key: EnvAuthType, Value: "Pkce"}}
	env, err := BuildEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		EnvAuthType: "ExternalCommand", EnvAuthCommand: `["printenv", "FLYTE_MANAGER_TASK_TOKEN"]`,
		EnvInsecure: "false", EnvSkipVerify: "true",
	} {
		if got, _ := env.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if _, ok := env.Get(EnvTaskToken); ok {
		t.Errorf("the environment carries %s: it is a secret's", EnvTaskToken)
	}
	noAuth, err := BuildEnv(baseSpec())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := noAuth.Get(EnvAuthType); ok {
		t.Errorf("without auth the environment sets %s", EnvAuthType)
	}
	if _, err := SecretDelivery(&core.Secret{Key: "k", EnvVar: EnvTaskToken}); err == nil {
		t.Errorf("a requested secret may set %s", EnvTaskToken)
	}
}
