package attempt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/store"
)

// Every attempt gets the storage hook's variables in its environment and
// its credentials as secrets (first, so that a secret the task requests
// under the same name wins); the credentials never enter the environment,
// which drivers log and write into Pod specs.
func TestPlanStorageAccess(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		const key = "storage-s3cr3t"
		access := &attempt.StorageAccess{
			Env:     []contract.KV{{Key: "FLYTE_AWS_ENDPOINT", Value: "http://s3.example:9000"}, {Key: "AWS_REGION", Value: "eu-west-1"}},
			Secrets: []contract.Secret{{Key: "storage:FLYTE_AWS_SECRET_ACCESS_KEY", EnvVar: "FLYTE_AWS_SECRET_ACCESS_KEY", Value: []byte(key)}},
		}
		var asked []string
		hook := secretValues{values: map[string]string{"tok": "t0k"}, asked: &asked}
		c := attempt.New(f.state, attempt.Options{Hooks: attempt.Hooks{Secrets: hook, Storage: access}})
		opts := attempt.PlanOptions{Endpoint: "10.0.0.1:8090", NoContainer: "only containers here"}

		a := f.run(t, "rstorage", withSecrets("t.storage", &core.Secret{Key: "tok", EnvVar: "TOK"}), nil)
		p, err := c.Plan(ctx, a, opts)
		if err != nil || p.Launch == nil {
			t.Fatalf("plan %+v, %v; want a launch", p, err)
		}
		env := map[string]string{}
		for _, kv := range p.Launch.Env {
			env[kv.Key] = kv.Value
			if strings.Contains(kv.Value, key) {
				t.Errorf("the environment holds the secret key in %s", kv.Key)
			}
		}
		if env["FLYTE_AWS_ENDPOINT"] != "http://s3.example:9000" || env["AWS_REGION"] != "eu-west-1" {
			t.Errorf("environment %v lacks the storage variables", env)
		}
		got := p.Launch.Secrets
		if len(got) != 2 || got[0].EnvVar != "FLYTE_AWS_SECRET_ACCESS_KEY" || string(got[0].Value) != key || got[1].EnvVar != "TOK" {
			t.Fatalf("secrets %v, want the storage credentials first, then the task's", got)
		}
		if len(access.Secrets) != 1 {
			t.Fatal("planning changed the hook's secrets")
		}
	})
}

// With Scoped set, each attempt gets the credentials it mints for the
// action (a key of its own) instead of the hook's shared ones.
func TestPlanScopedStorageAccess(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		var minted []string
		access := &attempt.StorageAccess{
			Secrets: []contract.Secret{{Key: "storage:FLYTE_AWS_SECRET_ACCESS_KEY", EnvVar: "FLYTE_AWS_SECRET_ACCESS_KEY", Value: []byte("shared")}},
			Scoped: func(a *store.Action, _ time.Duration) ([]contract.Secret, error) {
				minted = append(minted, a.RunName)
				return []contract.Secret{{Key: "storage:FLYTE_AWS_SECRET_ACCESS_KEY", EnvVar: "FLYTE_AWS_SECRET_ACCESS_KEY", Value: []byte("own-" + a.RunName)}}, nil
			},
		}
		c := attempt.New(f.state, attempt.Options{Hooks: attempt.Hooks{Storage: access}})
		a := f.run(t, "rscoped", withSecrets("t.scoped"), nil)
		p, err := c.Plan(ctx, a, attempt.PlanOptions{Endpoint: "10.0.0.1:8090", NoContainer: "only containers here"})
		if err != nil || p.Launch == nil {
			t.Fatalf("plan %+v, %v; want a launch", p, err)
		}
		if got := p.Launch.Secrets; len(got) != 1 || string(got[0].Value) != "own-rscoped" || len(minted) != 1 {
			t.Fatalf("secrets %v (minted for %v), want the run's own key only", got, minted)
		}
	})
}

// With the credential hook (auth.mode required), each attempt gets the
// credential minted for its action as a secret, never in its environment,
// and the environment has the SDK authenticate with it over TLS.
func TestPlanTaskCredential(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		cred := &attempt.CredentialAccess{TLS: true, SkipVerify: true, Mint: func(a *store.Action, _ time.Duration) string {
			return "cred-of-" + a.RunName + "/" + a.Name
		}}
		c := attempt.New(f.state, attempt.Options{Hooks: attempt.Hooks{Credential: cred}})
		a := f.run(t, "rcred", withSecrets("t.cred"), nil)
		p, err := c.Plan(ctx, a, attempt.PlanOptions{Endpoint: "10.0.0.1:8090", NoContainer: "only containers here"})
		if err != nil || p.Launch == nil {
			t.Fatalf("plan %+v, %v; want a launch", p, err)
		}
		got := p.Launch.Secrets
		if len(got) != 1 || got[0].EnvVar != contract.EnvTaskToken || string(got[0].Value) != "cred-of-rcred/a0" {
			t.Fatalf("secrets %v, want the attempt's credential", got)
		}
		for _, kv := range p.Launch.Env {
			if strings.Contains(kv.Value, "cred-of-") {
				t.Errorf("the environment holds the credential in %s", kv.Key)
			}
		}
		if v, _ := p.Launch.Env.Get(contract.EnvAuthType); v != "ExternalCommand" {
			t.Errorf("%s = %q", contract.EnvAuthType, v)
		}
		if v, _ := p.Launch.Env.Get(contract.EnvInsecure); v != "false" {
			t.Errorf("%s = %q, want false (TLS)", contract.EnvInsecure, v)
		}
	})
}
