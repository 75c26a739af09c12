package contract

import (
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/core"
)

// How a task receives the secrets it requests (TaskTemplate.
// security_context.secrets, made by the SDK's flyte.Secret), as the
// reference's embedded secret manager delivers them and the SDK and task
// code read them:
//
//   - as an environment variable (mount_requirement ENV_VAR or ANY): named
//     env_var (the SDK fills it: as_env_var, or the key upper-cased with '-'
//     as '_'), else SecretEnvPrefix + the key upper-cased; with
//     FLYTE_SECRETS_ENV_PREFIX set to SecretEnvPrefix;
//   - as a file (mount_requirement FILE, flyte.Secret(mount=...)): a file
//     named by the key in the secrets directory (with a group, as in the
//     SDK's examples and the reference's Kubernetes secret manager:
//     <group>/<key>, both lower-cased), which
//     FLYTE_SECRETS_DEFAULT_DIR names (SecretsMountPath in a Pod; the
//     attempt's private directory for a host process, which cannot own
//     /etc/flyte/secrets), with FLYTE_SECRETS_FILE_PREFIX empty; when the
//     request names an env_var too, that variable holds the file's path.
const (
	EnvSecretsEnvPrefix  = "FLYTE_SECRETS_ENV_PREFIX"
	EnvSecretsDefaultDir = "FLYTE_SECRETS_DEFAULT_DIR"
	EnvSecretsFilePrefix = "FLYTE_SECRETS_FILE_PREFIX"
	SecretEnvPrefix      = "_UNION_"
	// SecretsMountPath is the only mount path the SDK accepts.
	SecretsMountPath = "/etc/flyte/secrets"
)

// Secret is one secret delivered to an attempt. Its String, GoString and
// LogValue never show the value.
type Secret struct {
	// Key is the requested key: the secret's name in the Secret service.
	Key   string
	Value []byte
	// EnvVar, when set, delivers Value in this environment variable.
	EnvVar string
	// File, when set, delivers Value as this file (a relative path) in the
	// secrets directory.
	File string
	// PathEnvVar, when set, is the variable holding File's path.
	PathEnvVar string
}

func (s Secret) String() string       { return fmt.Sprintf("secret[%s]", s.Key) }
func (s Secret) GoString() string     { return s.String() }
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// SecretDelivery is how a request wants its secret: everything but the
// value.
func SecretDelivery(req *core.Secret) (Secret, error) {
	key := req.GetKey()
	if key == "" {
		return Secret{}, fmt.Errorf("a requested secret has no key")
	}
	if key == "." || key == ".." || strings.ContainsAny(key, "/\\\x00=") {
		return Secret{}, fmt.Errorf("requested secret key %q cannot name a secret", key)
	}
	s := Secret{Key: key}
	switch req.GetMountRequirement() {
	case core.Secret_ANY, core.Secret_ENV_VAR:
		s.EnvVar = req.GetEnvVar()
		if s.EnvVar == "" {
			s.EnvVar = SecretEnvPrefix + strings.ToUpper(key)
		}
	case core.Secret_FILE:
		s.File, s.PathEnvVar = key, req.GetEnvVar()
		if g := req.GetGroup(); g != "" {
			if g == "." || g == ".." || strings.ContainsAny(g, "/\\\x00") {
				return Secret{}, fmt.Errorf("secret %q: group %q cannot name a directory", key, g)
			}
			s.File = strings.ToLower(g) + "/" + strings.ToLower(key)
		}
	default:
		return Secret{}, fmt.Errorf("secret %q: unknown mount requirement %d", key, req.GetMountRequirement())
	}
	for _, name := range []string{s.EnvVar, s.PathEnvVar} {
		if strings.ContainsAny(name, "=\x00") {
			return Secret{}, fmt.Errorf("secret %q: environment variable %q cannot be set", key, name)
		}
		if slices.Contains(reservedNames, name) {
			return Secret{}, fmt.Errorf("secret %q: environment variable %s belongs to the task-process contract; choose another as_env_var", key, name)
		}
	}
	return s, nil
}

// reservedNames are the variables a secret may not set: the contract's own
// (see BuildEnv, whose last layer nothing overrides) and the ones telling
// the task where its secrets are.
var reservedNames = []string{
	EnvRunBase, EnvOrg, EnvProject, EnvDomain, EnvExecutionID, EnvRunName, EnvActionName, EnvAttempt,
	EnvEndpoint, EnvInsecure, EnvUseActions, EnvTaskProject, EnvTaskDomain, EnvTaskName, EnvTaskVersion,
	EnvSecretsEnvPrefix, EnvSecretsDefaultDir, EnvSecretsFilePrefix,
	EnvAuthType, EnvAuthCommand, EnvSkipVerify, EnvTaskToken,
}

// SecretEnv is the environment that tells the task where its secrets are,
// with the secrets directory dir: the variables above, never a value.
func SecretEnv(secrets []Secret, dir string) []KV {
	var out []KV
	files, envs := false, false
	for _, s := range secrets {
		if s.File != "" {
			files = true
			if s.PathEnvVar != "" {
				out = append(out, KV{Key: s.PathEnvVar, Value: path.Join(dir, s.File)})
			}
		}
		if s.EnvVar != "" {
			envs = true
		}
	}
	if envs {
		out = append(out, KV{Key: EnvSecretsEnvPrefix, Value: SecretEnvPrefix})
	}
	if files {
		out = append(out, KV{Key: EnvSecretsDefaultDir, Value: dir}, KV{Key: EnvSecretsFilePrefix, Value: ""})
	}
	return out
}

// With returns e with kvs set, each replacing a variable of its name.
func (e Env) With(kvs ...KV) Env {
	var b envBuilder
	for _, kv := range e {
		b.set(kv.Key, kv.Value)
	}
	for _, kv := range kvs {
		b.set(kv.Key, kv.Value)
	}
	return b.env
}
