package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/oidctest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/testkit"
)

// The real SDK signs in at an identity provider with DeviceFlow, over TLS:
// the manager's auth.oidc points at a provider running in the test (which
// approves every device code at once), the SDK finds the provider's device
// endpoint through GetOAuth2Metadata, polls the manager's token endpoint
// (forwarded to the provider), and sends the provider's JWT. A person bound
// to admin runs a task to the end; a person the provider knows but no
// binding names is refused with PERMISSION_DENIED.
func TestAuthSDKDeviceFlowWithOIDC(t *testing.T) {
	venv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	iss := oidctest.New(t)
	callbackPort, err := testkit.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := startOIDCManager(t, iss, mgrproc.Options{}, fmt.Sprintf(`redirectUri: http://localhost:%d/callback
bindings:
  - {subject: alice, role: admin}
`, callbackPort))
	if !strings.HasPrefix(m.URL, "https://") {
		t.Fatalf("banner URL %s, want https", m.URL)
	}
	ca := filepath.Join(m.Home, "tls", "tls.crt")
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "cli"), dir)
	// The config a user writes: the manager over TLS, DeviceFlow.
	flyte := func(args ...string) (string, error) {
		cmd := venvCommand(t, ctx, dir, "flyte", args...)
		cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+ca)
		out, err := cmd.CombinedOutput()
		return ansiEscape.ReplaceAllString(string(out), ""), err
	}
	out, err := flyte("create", "config", "--endpoint", sdkEndpoint(m), "--auth-type", "device-flow",
		"--project", testProject, "--domain", testDomain)
	if err != nil {
		t.Fatalf("flyte create config: %v\n%s", err, out)
	}

	// alice: bound to admin. Each CLI process has a HOME of its own
	// (sdkEnv), so each signs in afresh.
	out, err = flyte("run", "cli_tasks.py", "double", "--x", "1")
	match := createdRun.FindStringSubmatch(out)
	if match == nil || (err != nil && !abortedAtExit(err)) {
		t.Fatalf("flyte run as alice: %v\n%s", err, out)
	}
	if !strings.Contains(out, iss.URL+"/device") {
		t.Errorf("the SDK did not print the provider's verification URL:\n%s", out)
	}
	if n := iss.GrantsServed("urn:ietf:params:oauth:grant-type:device_code"); n == 0 {
		t.Errorf("the provider served no device_code grant")
	}
	waitRunAs(t, ctx, m, iss.Token("alice"), match[1])

	// mallory: the provider knows her, no binding names her. (A run, not
	// a list: lists answer only what the caller may see.)
	iss.SetUser(oidctest.User{Subject: "mallory", Email: "mallory@example.com"})
	out, err = flyte("run", "cli_tasks.py", "double", "--x", "2")
	if err == nil || createdRun.MatchString(out) || !strings.Contains(out, "user:mallory may not") {
		t.Errorf("flyte run as mallory: %v, want PERMISSION_DENIED naming her\n%s", err, out)
	}

	// Pkce, headless: the "browser" follows the provider's redirect to
	// the SDK's callback (webbrowser honours $BROWSER).
	iss.SetUser(oidctest.User{Subject: "alice", Email: "alice@example.com"})
	pkceDir := t.TempDir()
	cmd := venvCommand(t, ctx, pkceDir, "flyte", "create", "config", "--endpoint", sdkEndpoint(m), "--auth-type", "pkce",
		"--project", testProject, "--domain", testDomain)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("flyte create config: %v\n%s", err, out)
	}
	pkceCtx, pkceCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer pkceCancel()
	cmd = venvCommand(t, pkceCtx, pkceDir, "flyte", "get", "run", match[1])
	// webbrowser runs $BROWSER with the URL and waits for it, while the
	// SDK serves its callback on the event loop that waits: follow the
	// redirects in the background.
	browser := filepath.Join(t.TempDir(), "browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\ncurl -sfL -o /dev/null \"$1\" &\n"), 0o755); err != nil { //nolint:gosec // an executable
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+ca, "BROWSER="+browser)
	pkceOut, err := cmd.CombinedOutput()
	if err != nil && !abortedAtExit(err) || !strings.Contains(string(pkceOut), match[1]) {
		t.Errorf("flyte get run with Pkce: %v\n%s", err, pkceOut)
	}
	if iss.GrantsServed("authorization_code") == 0 {
		t.Errorf("the provider served no authorization_code grant")
	}

	// A token from the provider for another audience is UNAUTHENTICATED.
	c := iss.Claims("alice")
	c["aud"] = "another-api"
	_, err = authedRunClient(m, iss.Sign(c)).GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{
		RunId: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: match[1]}}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a token for another audience: %v, want UNAUTHENTICATED", err)
	}
}

// authedRunClient is a RunService client over the manager's TLS sending
// token as the bearer credential.
func authedRunClient(m *manager, token string) workflowconnect.RunServiceClient {
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
	return workflowconnect.NewRunServiceClient(insecure, m.URL, connect.WithInterceptors(connect.UnaryInterceptorFunc(
		func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+token)
				return next(ctx, req)
			}
		})))
}

// waitRunAs waits for run to succeed, reading it with token.
func waitRunAs(t *testing.T, ctx context.Context, m *manager, token, run string) {
	t.Helper()
	client := authedRunClient(m, token)
	var last common.ActionPhase
	if msg := testkit.Poll(5*time.Minute, time.Second, func() string {
		resp, err := client.GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{
			RunId: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: run}}))
		if err != nil {
			return "GetRunDetails: " + err.Error()
		}
		last = resp.Msg.GetDetails().GetAction().GetStatus().GetPhase()
		if phase.FromProto(last).Terminal() {
			return ""
		}
		return "still " + phaseName(last)
	}); msg != "" {
		t.Fatalf("run %s did not end: %s", run, msg)
	}
	if phaseName(last) != "SUCCEEDED" {
		t.Fatalf("run %s is %s", run, phaseName(last))
	}
}

// startOIDCManager starts a manager over TLS with auth.mode required and
// auth.oidc pointing at iss; authYAML is the rest of auth (bindings,
// console, redirectUri), unindented. o adds to the start options (a DSN,
// a port).
func startOIDCManager(t *testing.T, iss *oidctest.Issuer, o mgrproc.Options, authYAML string) *manager {
	t.Helper()
	cfg := fmt.Sprintf("auth:\n  mode: required\n  oidc:\n    issuer: %s\n    audiences: [%s]\n    clientId: %s\n",
		iss.URL, iss.Audience, iss.ClientID)
	for _, line := range strings.Split(strings.TrimRight(authYAML, "\n"), "\n") {
		cfg += "  " + line + "\n"
	}
	cfgFile := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Bin, o.Config = managerBin, append(o.Config, cfgFile)
	o.Env = append(append(o.Env, sdkManagerEnv(t)...), "FLYTE_MANAGER_SERVER_TLS_ENABLED=true")
	return startManagerWith(t, o)
}
