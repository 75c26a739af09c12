package attempt_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/store"
)

// secretValues is a SecretHook over a map; it records what it was asked.
type secretValues struct {
	values map[string]string
	asked  *[]string
}

func (s secretValues) Values(_ context.Context, _ *store.Action, names []string) (map[string][]byte, error) {
	*s.asked = append(*s.asked, names...)
	out := map[string][]byte{}
	for _, n := range names {
		if v, ok := s.values[n]; ok {
			out[n] = []byte(v)
		}
	}
	return out, nil
}

func withSecrets(name string, reqs ...*core.Secret) *core.TaskTemplate {
	t := template(name, &core.Container{Command: []string{"a0"}}, nil)
	t.SecurityContext = &core.SecurityContext{Secrets: reqs}
	return t
}

// The secrets a task requests reach the launch as structured values with
// how to deliver them; never in its environment, whose values a driver
// logs or writes into a Pod spec.
func TestPlanSecrets(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		opts := attempt.PlanOptions{Endpoint: "10.0.0.1:8090", NoContainer: "only containers here"}
		var asked []string
		hook := secretValues{values: map[string]string{"api-token": "s3cr3t-token", "cert": "s3cr3t-cert"}, asked: &asked}
		c := attempt.New(f.state, attempt.Options{Hooks: attempt.Hooks{Secrets: hook}})

		a := f.run(t, "rsecrets", withSecrets("t.secret",
			&core.Secret{Key: "api-token", MountRequirement: core.Secret_ENV_VAR, EnvVar: "API_TOKEN"},
			&core.Secret{Key: "api-token"}, // ANY, no env var: the reference's default name
			&core.Secret{Key: "cert", MountRequirement: core.Secret_FILE},
			&core.Secret{Key: "cert", Group: "My-Group", MountRequirement: core.Secret_FILE},
		), nil)
		p, err := c.Plan(ctx, a, opts)
		if err != nil {
			t.Fatal(err)
		}
		if p.Launch == nil {
			t.Fatalf("plan %+v, want a launch", p)
		}
		want := []contract.Secret{
			{Key: "api-token", Value: []byte("s3cr3t-token"), EnvVar: "API_TOKEN"},
			{Key: "api-token", Value: []byte("s3cr3t-token"), EnvVar: "_UNION_API-TOKEN"},
			{Key: "cert", Value: []byte("s3cr3t-cert"), File: "cert"},
			{Key: "cert", Value: []byte("s3cr3t-cert"), File: "my-group/cert"},
		}
		if got := p.Launch.Secrets; len(got) != len(want) {
			t.Fatalf("secrets %v, want %v", got, want)
		}
		for i, s := range p.Launch.Secrets {
			w := want[i]
			if s.Key != w.Key || string(s.Value) != string(w.Value) || s.EnvVar != w.EnvVar || s.File != w.File {
				t.Errorf("secret %d = {%s %q %q}, want {%s %q %q}", i, s.Key, s.EnvVar, s.File, w.Key, w.EnvVar, w.File)
			}
		}
		if strings.Join(asked, ",") != "api-token,cert" {
			t.Errorf("the hook was asked for %v, want each name once", asked)
		}
		if env := fmt.Sprint(p.Launch.Env.Environ()); strings.Contains(env, "s3cr3t") {
			t.Fatalf("a secret value is in the launch's environment: %s", env)
		}
		if shown := fmt.Sprintf("%v %+v %#v", p.Launch.Secrets, p.Launch.Secrets[0], p.Launch.Secrets); strings.Contains(shown, "s3cr3t") {
			t.Fatalf("printing secrets shows a value: %s", shown)
		}
	})
}

// A missing secret fails the action at once, as the user's non-recoverable
// error naming the secret: no attempt could get it, so no retry is spent.
func TestPlanMissingSecret(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		var asked []string
		c := attempt.New(f.state, attempt.Options{Hooks: attempt.Hooks{Secrets: secretValues{values: map[string]string{"there": "v"}, asked: &asked}}})
		for name, tc := range map[string]struct {
			tmpl *core.TaskTemplate
			want string
		}{
			"missing":     {withSecrets("t.missing", &core.Secret{Key: "there"}, &core.Secret{Key: "not-there", EnvVar: "X"}), `secret "not-there" was not found in project`},
			"bad request": {withSecrets("t.badreq", &core.Secret{Key: "../x"}), `requested secret key "../x" cannot name a secret`},
			"bad group": {withSecrets("t.badgroup", &core.Secret{Key: "there", Group: "..", MountRequirement: core.Secret_FILE}),
				`group ".." cannot name a directory`},
			"contract variable": {withSecrets("t.contract", &core.Secret{Key: "there", EnvVar: "_U_RUN_BASE"}),
				"environment variable _U_RUN_BASE belongs to the task-process contract"},
		} {
			t.Run(name, func(t *testing.T) {
				a := f.run(t, "r"+strings.ReplaceAll(name, " ", ""), tc.tmpl, nil)
				p, err := c.Plan(ctx, a, attempt.PlanOptions{Endpoint: "10.0.0.1:8090"})
				if err != nil {
					t.Fatal(err)
				}
				ev, ok := p.Event.(machine.Failed)
				if p.Launch != nil || !ok || ev.Code != attempt.CodeSecretNotFound || ev.Kind != machine.KindUser || ev.Recoverable ||
					!strings.Contains(ev.Message, tc.want) {
					t.Fatalf("plan %+v, want a non-recoverable user failure %s containing %q", p, attempt.CodeSecretNotFound, tc.want)
				}
			})
		}
	})
}
