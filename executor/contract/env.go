package contract

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
)

// Variables the runtime requires or consumes (flyte/_bin/runtime.py,
// flyte/_initialize.py init_in_cluster, the remote controller).
const (
	EnvRunBase       = "_U_RUN_BASE"                      // run output base; a0 exits 2 without it
	EnvOrg           = "_U_ORG_NAME"                      // must be non-empty (assert)
	EnvProject       = "FLYTE_INTERNAL_EXECUTION_PROJECT" // required
	EnvDomain        = "FLYTE_INTERNAL_EXECUTION_DOMAIN"  // required
	EnvExecutionID   = "FLYTE_INTERNAL_EXECUTION_ID"
	EnvRunName       = "RUN_NAME"    // used while --run-name is a template
	EnvActionName    = "ACTION_NAME" // used while --name is a template
	EnvAttempt       = "FLYTE_ATTEMPT_NUMBER"
	EnvEndpoint      = "_U_EP_OVERRIDE" // the controller's endpoint (default host.docker.internal:8090)
	EnvInsecure      = "_U_INSECURE"
	EnvUseActions    = "_U_USE_ACTIONS"          // "1": the controller talks ActionsService
	EnvDisableSentry = "FLYTE_DISABLE_SENTRY"    // legacy name, still honoured
	EnvDisableTelem  = "FLYTE_DISABLE_TELEMETRY" // current name (flyte/_sentry.py)
	EnvFSSpecFile    = "FSSPEC_FILE"             // fsspec kwargs for the file:// filesystem
	EnvUnbuffered    = "PYTHONUNBUFFERED"
	EnvTaskProject   = "FLYTE_INTERNAL_TASK_PROJECT"
	EnvTaskDomain    = "FLYTE_INTERNAL_TASK_DOMAIN"
	EnvTaskName      = "FLYTE_INTERNAL_TASK_NAME"
	EnvTaskVersion   = "FLYTE_INTERNAL_TASK_VERSION"

	// Auth with auth.mode required (TaskAuth): the SDK's in-task init
	// (init_in_cluster) reads the auth type and token command from the
	// environment, and runs the command for a token whenever the manager
	// answers UNAUTHENTICATED.
	EnvAuthType      = "FLYTE_AUTH_TYPE"
	EnvAuthCommand   = "FLYTE_AUTH_COMMAND"
	EnvSkipVerify    = "_U_INSECURE_SKIP_VERIFY"
	EnvTaskToken     = "FLYTE_MANAGER_TASK_TOKEN" // the attempt's credential, delivered as a secret
	authTypeExternal = "ExternalCommand"
	taskTokenCommand = `["printenv", "` + EnvTaskToken + `"]`
)

// DefaultOrg is the org a task sees when the run has none (see ident.LocalOrg).
const DefaultOrg = ident.LocalOrg

// FSSpecAutoMkdir makes fsspec's LocalFileSystem create parent directories on
// write. A parent task writes `<run_base>/<child>/inputs.pb` itself, a path
// only the SDK knows, so without it fanning out fails with FileNotFoundError.
const FSSpecAutoMkdir = `{"auto_mkdir": true}`

// hostBasics are inherited from the manager's environment by default: what a
// process needs to find programs, files, locale and certificates.
var hostBasics = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ",
	"TMPDIR", "TMP", "TEMP", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR", "LD_LIBRARY_PATH",
}

// hostDenied are never inherited from the manager's environment, even when a
// pass-through pattern matches: they would point the task at another Flyte
// (FLYTECTL_CONFIG/UCTL_CONFIG make init_in_cluster read that file,
// FLYTE_ADMIN_ENDPOINT/FLYTE_AUTH_* override endpoint and auth), hand it the
// host's credentials (API keys, AWS_*), or pose as contract variables.
var hostDenied = []string{
	"FLYTECTL_CONFIG", "UCTL_CONFIG", "FLYTE_API_KEY", "EAGER_API_KEY", "_UNION_EAGER_API_KEY",
	"FLYTE_*", "AWS_*", "_U_*", "_F_*", "UNION_*", "_UNION_*",
}

// KV is one environment variable.
type KV struct {
	Key   string
	Value string
}

// EnvSpec is everything the environment of one attempt is built from.
type EnvSpec struct {
	// Host is the manager's environment (os.Environ()). Only hostBasics and
	// names matching PassThrough are inherited, never the denied ones.
	Host []string
	// PassThrough adds host names to inherit: exact names, `PREFIX*`
	// patterns, or `*` for everything not denied.
	PassThrough []string
	// Defaults are operator-configured variables (storage endpoint and keys,
	// LOG_LEVEL, ...).
	Defaults []KV
	// RunEnv is RunSpec.envs of the run.
	RunEnv []*core.KeyValuePair
	// TaskEnv is TaskTemplate.container.env.
	TaskEnv []*core.KeyValuePair

	Org        string // "" becomes DefaultOrg
	Project    string
	Domain     string
	RunName    string
	ActionName string
	Attempt    uint32
	// RunBase is the run output base (`_U_RUN_BASE`).
	RunBase string
	// Endpoint is the manager's address as the task reaches it, host:port.
	Endpoint string
	// TLS says the endpoint speaks TLS; false sets _U_INSECURE=true.
	TLS bool
	// TaskID, when set, fills FLYTE_INTERNAL_TASK_*.
	TaskID *core.Identifier
	// Auth, when set, has the SDK authenticate with the attempt's
	// credential (delivered separately, as the secret EnvTaskToken).
	Auth *TaskAuth
}

// TaskAuth is how a task authenticates to the manager: the SDK's
// ExternalCommand auth, whose command prints EnvTaskToken.
type TaskAuth struct {
	// SkipVerify has the SDK trust the certificate the endpoint presents.
	SkipVerify bool
}

// BuildEnv assembles an attempt's environment. Layers, later ones overriding
// earlier ones:
//
//  1. inherited host basics (and PassThrough), minus denied names;
//  2. contract defaults: FLYTE_DISABLE_SENTRY=true and
//     FLYTE_DISABLE_TELEMETRY=true (the SDK otherwise reports crashes to a
//     hard-coded Sentry DSN), FSSPEC_FILE auto_mkdir, PYTHONUNBUFFERED=1 (so
//     print() output reaches the log as it happens, in order with stderr,
//     instead of in one block at exit);
//  3. operator Defaults;
//  4. the run's RunSpec envs;
//  5. the task's container env (a task's own setting beats the run's);
//  6. the contract variables (identity, run base, endpoint, attempt), which
//     nothing overrides.
//
// It fails with errs.ErrInvalid when a required value is missing or a
// variable cannot be passed to a process (empty name, '=' in a name, NUL).
func BuildEnv(s EnvSpec) (Env, error) {
	for _, req := range []struct{ name, value string }{
		{"project", s.Project}, {"domain", s.Domain}, {"run name", s.RunName},
		{"action name", s.ActionName}, {"run base", s.RunBase}, {"endpoint", s.Endpoint},
	} {
		if req.value == "" {
			return nil, errs.Invalidf("task environment: %s is required", req.name)
		}
	}
	if s.Attempt == 0 {
		return nil, errs.Invalidf("task environment: attempt numbers are 1-based")
	}
	b, err := baseEnv(s)
	if err != nil {
		return nil, err
	}
	for _, layer := range []struct {
		name string
		kvs  []*core.KeyValuePair
	}{{"run", s.RunEnv}, {"task", s.TaskEnv}} {
		for _, kv := range layer.kvs {
			if err := b.setChecked(layer.name, kv.GetKey(), kv.GetValue()); err != nil {
				return nil, err
			}
		}
	}
	org := s.Org
	if org == "" {
		org = DefaultOrg
	}
	insecure := "true"
	if s.TLS {
		insecure = "false"
	}
	b.set(EnvRunBase, s.RunBase)
	b.set(EnvOrg, org)
	b.set(EnvProject, s.Project)
	b.set(EnvDomain, s.Domain)
	b.set(EnvExecutionID, s.RunName)
	b.set(EnvRunName, s.RunName)
	b.set(EnvActionName, s.ActionName)
	// Attempts are numbered from 1 everywhere else (the API, output
	// directories), but the task contract counts retries from 0: the SDK's
	// examples crash "on attempt 0" and the reference sets it so.
	b.set(EnvAttempt, strconv.FormatUint(uint64(s.Attempt-1), 10))
	b.set(EnvEndpoint, s.Endpoint)
	b.set(EnvInsecure, insecure)
	b.set(EnvUseActions, "1")
	if s.Auth != nil {
		b.set(EnvAuthType, authTypeExternal)
		b.set(EnvAuthCommand, taskTokenCommand)
		if s.Auth.SkipVerify {
			b.set(EnvSkipVerify, "true")
		}
	}
	if id := s.TaskID; id != nil {
		b.set(EnvTaskProject, id.GetProject())
		b.set(EnvTaskDomain, id.GetDomain())
		b.set(EnvTaskName, id.GetName())
		b.set(EnvTaskVersion, id.GetVersion())
	}
	return b.env, nil
}

// baseEnv is the first three layers of BuildEnv: host, contract defaults,
// operator defaults.
func baseEnv(s EnvSpec) (*envBuilder, error) {
	var b envBuilder
	for _, kv := range s.Host {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || matchAny(k, hostDenied) {
			continue
		}
		if matchAny(k, hostBasics) || matchAny(k, s.PassThrough) {
			b.set(k, v)
		}
	}
	b.set(EnvDisableSentry, "true")
	b.set(EnvDisableTelem, "true")
	b.set(EnvFSSpecFile, FSSpecAutoMkdir)
	b.set(EnvUnbuffered, "1")
	for _, kv := range s.Defaults {
		if err := b.setChecked("default", kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	return &b, nil
}

type envBuilder struct {
	env   Env
	index map[string]int
}

func (b *envBuilder) set(k, v string) {
	if b.index == nil {
		b.index = map[string]int{}
	}
	if i, ok := b.index[k]; ok {
		b.env[i].Value = v
		return
	}
	b.index[k] = len(b.env)
	b.env = append(b.env, KV{Key: k, Value: v})
}

func (b *envBuilder) setChecked(layer, k, v string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return errs.Invalidf("%s environment variable %q: names must be non-empty without '=' or NUL", layer, k)
	}
	if strings.ContainsRune(v, 0) {
		return errs.Invalidf("%s environment variable %s: value contains NUL", layer, k)
	}
	b.set(k, v)
	return nil
}

func matchAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// Env is an ordered environment with unique names. Its String and LogValue
// show names only: values may be secrets.
type Env []KV

// Environ is the environment in os/exec form.
func (e Env) Environ() []string {
	out := make([]string, len(e))
	for i, kv := range e {
		out[i] = kv.Key + "=" + kv.Value
	}
	return out
}

// Get returns the value of name.
func (e Env) Get(name string) (string, bool) {
	for _, kv := range e {
		if kv.Key == name {
			return kv.Value, true
		}
	}
	return "", false
}

// Names lists the variable names in order.
func (e Env) Names() []string {
	out := make([]string, len(e))
	for i, kv := range e {
		out[i] = kv.Key
	}
	return out
}

func (e Env) String() string {
	return fmt.Sprintf("env[%s]", strings.Join(e.Names(), " "))
}

// GoString keeps values out of %#v too.
func (e Env) GoString() string { return e.String() }

// LogValue keeps values out of structured logs.
func (e Env) LogValue() slog.Value {
	return slog.StringValue(strings.Join(e.Names(), ","))
}
