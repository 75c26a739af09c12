package config

import (
	"strings"
	"testing"
)

// auth.oidc and auth.bindings load from a file and are checked at startup.
func TestAuthOIDCConfig(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	c, err := Load(Sources{Files: []string{writeFile(t, dir, "c.yaml", `auth:
  mode: required
  oidc:
    issuer: https://idp.example.com/realms/flyte
    audiences: [flyte-manager]
    clientId: flyte-cli
    groupsClaim: roles
  bindings:
    - {subject: alice, role: admin}
    - {group: ml, role: contributor, project: flytesnacks, domain: development}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	o := c.Auth.OIDC
	if !o.Enabled() || o.SubjectClaim != "sub" || o.GroupsClaim != "roles" || len(c.Auth.Bindings) != 2 ||
		c.Auth.Bindings[1].Group != "ml" || c.Auth.Bindings[1].Project != "flytesnacks" {
		t.Fatalf("loaded %+v %+v", o, c.Auth.Bindings)
	}

	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"auth off":            {func(c *Config) { c.Auth.Mode = AuthOff }, "auth.oidc.issuer"},
		"plain http":          {func(c *Config) { c.Auth.OIDC.Issuer = "http://idp.example.com" }, "auth.oidc.issuer"},
		"relative issuer":     {func(c *Config) { c.Auth.OIDC.Issuer = "idp.example.com" }, "auth.oidc.issuer"},
		"no audience":         {func(c *Config) { c.Auth.OIDC.Audiences = nil }, "auth.oidc.audiences"},
		"no client":           {func(c *Config) { c.Auth.OIDC.ClientID = "" }, "auth.oidc.clientId"},
		"unknown role":        {func(c *Config) { c.Auth.Bindings[0].Role = "owner" }, "auth.bindings"},
		"subject and group":   {func(c *Config) { c.Auth.Bindings[0].Group = "ml" }, "auth.bindings"},
		"bindings no idp":     {func(c *Config) { c.Auth.OIDC.Issuer = "" }, "auth.bindings"},
		"subject and client":  {func(c *Config) { c.Auth.Bindings[0].Client = "robot" }, "auth.bindings"},
		"public client bound": {func(c *Config) { c.Auth.Bindings[0] = AuthBinding{Client: "flyte-cli", Role: "viewer"} }, "auth.oidc.clientId"},
	} {
		cc := *c
		cc.Auth.Bindings = append([]AuthBinding(nil), c.Auth.Bindings...)
		tc.mutate(&cc)
		if err := cc.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %s", name, err, tc.want)
		}
	}
	cc := *c
	cc.Auth.Bindings = []AuthBinding{{Client: "ci-robot", Role: "contributor"}}
	if err := cc.Validate(); err != nil {
		t.Errorf("a machine client's binding: %v", err)
	}
	cc.Auth.OIDC.Issuer = "http://127.0.0.1:5556"
	if err := cc.Validate(); err != nil {
		t.Errorf("loopback http issuer: %v", err)
	}
}

// The provider can be set from the environment too (bindings need a file).
func TestAuthOIDCFromEnv(t *testing.T) {
	isolate(t)
	t.Setenv("FLYTE_MANAGER_AUTH_MODE", "required")
	t.Setenv("FLYTE_MANAGER_AUTH_OIDC_ISSUER", "https://example.okta.com/oauth2/default")
	t.Setenv("FLYTE_MANAGER_AUTH_OIDC_AUDIENCES", "api://flyte")
	t.Setenv("FLYTE_MANAGER_AUTH_OIDC_CLIENTID", "0oa123")
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Auth.OIDC; o.Issuer != "https://example.okta.com/oauth2/default" || len(o.Audiences) != 1 || o.Audiences[0] != "api://flyte" || o.ClientID != "0oa123" {
		t.Errorf("from the environment: %+v", o)
	}
}
