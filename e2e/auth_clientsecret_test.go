package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/oidctest"
)

// The SDK's ClientSecret auth type from a config file (admin.authType
// ClientSecret, admin.clientId, admin.clientSecretLocation or
// admin.clientSecretEnvVar), over TLS, against a manager with an identity
// provider: one token endpoint (GetOAuth2Metadata's) serves both kinds of
// client. An API key's id and secret get the manager's token (`flyte
// whoami` answers the key); the provider's confidential client "ci-robot"
// gets the provider's token through the manager's endpoint, which the
// manager verifies and binds by auth.bindings' client: it runs a task in
// the project its binding names, and a client no binding names is refused.
func TestAuthSDKClientSecret(t *testing.T) {
	venv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	iss := oidctest.New(t)
	iss.AddClient(oidctest.Client{ID: "ci-robot", Secret: "robot secret/+="})
	iss.AddClient(oidctest.Client{ID: "stranger", Secret: "s"})
	b := backends[0]
	m := authManager{manager: startOIDCManager(t, iss, mgrproc.Options{DSN: b.dsn(t)}, fmt.Sprintf(`bindings:
  - {subject: alice, role: admin}
  - {client: ci-robot, role: contributor, project: %s, domain: %s}
`, testProject, testDomain)), t: t, ctx: ctx}
	ca := filepath.Join(m.Home, "tls", "tls.crt")

	// flyte runs the CLI in a directory holding the tasks and a config
	// with ClientSecret auth lines.
	flyte := func(auth string, env []string, args ...string) (string, error) {
		dir := t.TempDir()
		copyTree(t, filepath.Join("testdata", "cli"), dir)
		cfg := fmt.Sprintf("admin:\n  endpoint: dns:///%s\n  insecure: false\n  authType: ClientSecret\n%stask:\n  project: %s\n  domain: %s\n",
			sdkEndpoint(m.manager), auth, testProject, testDomain)
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := venvCommand(t, ctx, dir, "flyte", args...)
		cmd.Env = append(append(cmd.Env, "SSL_CERT_FILE="+ca), env...)
		out, err := cmd.CombinedOutput()
		return ansiEscape.ReplaceAllString(string(out), ""), err
	}
	secretFile := func(secret string) string {
		p := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// An API key as a registered client: its id is the client id.
	key, keyID := m.newKey("--role", "viewer", "--project", testProject, "--domain", testDomain)
	keySecret := strings.SplitN(bearerOf(t, key), ":", 2)[1]
	out, err := flyte("  clientId: "+keyID+"\n  clientSecretEnvVar: MY_FLYTE_SECRET\n", []string{"MY_FLYTE_SECRET=" + keySecret}, "whoami")
	if err != nil || !strings.Contains(out, "apikey:"+keyID) {
		t.Fatalf("flyte whoami with an API key through ClientSecret: %v\n%s", err, out)
	}
	if n := iss.GrantsServed("client_credentials"); n != 0 {
		t.Errorf("an API key's client_credentials reached the provider (%d grants)", n)
	}

	// The provider's machine client, its secret in a file.
	robot := "  clientId: ci-robot\n  clientSecretLocation: " + secretFile("robot secret/+=") + "\n"
	out, err = flyte(robot, nil, "whoami")
	if err != nil || !strings.Contains(out, "user:ci-robot") {
		t.Fatalf("flyte whoami as the provider's client: %v\n%s", err, out)
	}
	out, err = flyte(robot, nil, "run", "cli_tasks.py", "double", "--x", "3")
	match := createdRun.FindStringSubmatch(out)
	if match == nil || (err != nil && !abortedAtExit(err)) {
		t.Fatalf("flyte run as the provider's client: %v\n%s", err, out)
	}
	if iss.GrantsServed("client_credentials") == 0 {
		t.Errorf("the provider served no client_credentials grant")
	}
	waitRunAs(t, ctx, m.manager, iss.Token("alice"), match[1])

	out, err = flyte("  clientId: stranger\n  clientSecretLocation: "+secretFile("s")+"\n", nil, "run", "cli_tasks.py", "double", "--x", "4")
	if err == nil || createdRun.MatchString(out) || !strings.Contains(out, "user:stranger may not") {
		t.Errorf("flyte run as an unbound client: %v, want PERMISSION_DENIED naming it\n%s", err, out)
	}
}
