package config

import (
	"strings"
	"testing"
	"time"
)

// auth.console: an 8h session by default, the console's client falls back
// to auth.oidc.clientId, its secret comes from the environment and is
// never printed.
func TestAuthConsoleConfig(t *testing.T) {
	isolate(t)
	t.Setenv("FLYTE_MANAGER_AUTH_CONSOLE_CLIENTSECRET", "s3cret-value")
	dir := t.TempDir()
	c, err := Load(Sources{Files: []string{writeFile(t, dir, "c.yaml", `auth:
  mode: required
  oidc:
    issuer: https://idp.example.com/realms/flyte
    audiences: [flyte-manager]
    clientId: flyte-cli
`)}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.Console.SessionTTL != 8*time.Hour || c.Auth.ConsoleClientID() != "flyte-cli" || c.Auth.Console.ClientSecret != "s3cret-value" {
		t.Fatalf("loaded %+v", c.Auth.Console)
	}
	c.Auth.Console.ClientID = "flyte-console"
	if c.Auth.ConsoleClientID() != "flyte-console" {
		t.Error("auth.console.clientId is not the console's client")
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret-value") {
		t.Error("the printed configuration shows auth.console.clientSecret")
	}
	for _, ttl := range []time.Duration{0, 30 * time.Second, 31 * 24 * time.Hour} {
		cc := *c
		cc.Auth.Console.SessionTTL = ttl
		if err := cc.Validate(); err == nil || !strings.Contains(err.Error(), "auth.console.sessionTTL") {
			t.Errorf("sessionTTL %s: %v", ttl, err)
		}
	}
}
