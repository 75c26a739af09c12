package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/mgrproc"
)

// With auth.mode required (and TLS), an app's replicas get a credential of
// their own (internal/appcred), as attempts do: an app whose code calls
// the API with flyte.init_in_cluster runs a deployed task in its own
// project and domain (the run's executed_by is the app), and is refused in
// another domain. The client deploys with ClientSecret and an API key's id
// and secret from a config file, so the manager need not be on 443.
func TestAuthAppCallsTheAPI(t *testing.T) {
	venv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := backends[0]
	m := authManager{manager: startManagerWith(t, mgrproc.Options{Bin: managerBin, DSN: b.dsn(t),
		Env: append(sdkManagerEnv(t), "FLYTE_MANAGER_SERVER_TLS_ENABLED=true", "FLYTE_MANAGER_AUTH_MODE=required")}), t: t, ctx: ctx}
	key, keyID := m.newKey("--role", "contributor", "--project", testProject, "--domain", testDomain)
	admin, _ := m.newKey("--role", "admin")
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "cli"), dir)
	copyTree(t, filepath.Join("testdata", "apps"), dir)
	cfg := fmt.Sprintf("admin:\n  endpoint: dns:///%s\n  insecure: false\n  authType: ClientSecret\n  clientId: %s\n  clientSecretEnvVar: E2E_KEY_SECRET\ntask:\n  project: %s\n  domain: %s\n",
		sdkEndpoint(m.manager), keyID, testProject, testDomain)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	flyte := func(args ...string) string {
		cmd := venvCommand(t, ctx, dir, "flyte", args...)
		cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+filepath.Join(m.Home, "tls", "tls.crt"), "E2E_KEY_SECRET="+strings.SplitN(bearerOf(t, key), ":", 2)[1])
		out, err := cmd.CombinedOutput()
		if err != nil && !abortedAtExit(err) {
			t.Fatalf("flyte %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	flyte("deploy", "cli_tasks.py", "env")
	flyte("deploy", "caller.py", "caller")

	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
	apps := appconnect.NewAppServiceClient(insecure, m.URL)
	var url string
	deadline := time.Now().Add(3 * time.Minute)
	for url == "" && time.Now().Before(deadline) {
		req := connect.NewRequest(&pb.GetRequest{Identifier: &pb.GetRequest_AppId{AppId: e2eAppID("e2e-caller")}})
		req.Header().Set("Authorization", "Bearer "+bearerOf(t, admin))
		resp, err := apps.Get(ctx, req)
		if err == nil && resp.Msg.GetApp().GetStatus().GetCurrentReplicas() > 0 {
			url = resp.Msg.GetApp().GetStatus().GetIngress().GetPublicUrl()
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if url == "" {
		t.Fatalf("e2e-caller never served\nmanager:\n%s", m.output.String())
	}
	get := func(path string) map[string]any {
		resp, err := insecure.Get(strings.TrimSuffix(url, "/") + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("GET %s: %s %s", path, resp.Status, body)
		}
		return out
	}
	got := get("/run?x=21")
	if got["output"] != float64(42) || got["run"] == nil {
		t.Fatalf("the app's run: %v\nmanager:\n%s", got, m.output.String())
	}
	details, err := authedRunClient(m.manager, bearerOf(t, admin)).GetRunDetails(ctx, connect.NewRequest(&workflow.GetRunDetailsRequest{
		RunId: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: got["run"].(string)}}))
	if err != nil {
		t.Fatal(err)
	}
	if by := details.Msg.GetDetails().GetAction().GetMetadata().GetExecutedBy().GetUser().GetId().GetSubject(); by != "app:flytesnacks/development/e2e-caller" {
		t.Errorf("the app's run was executed by %q, want the app", by)
	}
	if got := fmt.Sprint(get("/other")["error"]); !strings.Contains(got, "app:flytesnacks/development/e2e-caller may not") || !strings.Contains(got, `domain "production"`) {
		t.Errorf("the app in another domain: %v, want a permission denial", got)
	}
}
