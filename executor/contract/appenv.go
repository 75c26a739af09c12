package contract

import (
	"strconv"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/errs"
)

// EnvPort is the port an app replica must serve on, as Knative and most
// hosting platforms name it: replicas share the host's network, so each
// gets a free port of its own.
const EnvPort = "PORT"

// AppEnvSpec is everything the environment of one app replica is built
// from: what the SDK's serve runtime (fserve, init_in_cluster) reads.
type AppEnvSpec struct {
	Host        []string // the manager's environment, filtered as for attempts
	PassThrough []string
	Defaults    []KV // operator defaults and the storage's variables
	// AppEnv is the app container's env (AppEnvironment.env_vars).
	AppEnv   []*core.KeyValuePair
	Org      string // "" becomes DefaultOrg
	Project  string
	Domain   string
	Endpoint string // the manager's host:port
	TLS      bool
	Port     int
	// Auth, when set, has the SDK in the replica authenticate with the
	// app's credential (delivered separately, as the secret EnvTaskToken).
	Auth *TaskAuth
}

// BuildAppEnv assembles a replica's environment: the first layers of
// BuildEnv (host basics, contract defaults, operator defaults), the app's
// own env, then what nothing overrides: its identity, the endpoint and
// PORT.
func BuildAppEnv(s AppEnvSpec) (Env, error) {
	for _, req := range []struct{ name, value string }{
		{"project", s.Project}, {"domain", s.Domain}, {"endpoint", s.Endpoint},
	} {
		if req.value == "" {
			return nil, errs.Invalidf("app environment: %s is required", req.name)
		}
	}
	if s.Port <= 0 {
		return nil, errs.Invalidf("app environment: a port is required")
	}
	b, err := baseEnv(EnvSpec{Host: s.Host, PassThrough: s.PassThrough, Defaults: s.Defaults})
	if err != nil {
		return nil, err
	}
	for _, kv := range s.AppEnv {
		if err := b.setChecked("app", kv.GetKey(), kv.GetValue()); err != nil {
			return nil, err
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
	b.set(EnvOrg, org)
	b.set(EnvProject, s.Project)
	b.set(EnvDomain, s.Domain)
	b.set(EnvEndpoint, s.Endpoint)
	b.set(EnvInsecure, insecure)
	b.set(EnvPort, strconv.Itoa(s.Port))
	if s.Auth != nil {
		b.set(EnvAuthType, authTypeExternal)
		b.set(EnvAuthCommand, taskTokenCommand)
		if s.Auth.SkipVerify {
			b.set(EnvSkipVerify, "true")
		}
	}
	return b.env, nil
}
