package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
)

// The SDK's own integration-test fixture path, as flyte-sdk's CI runs it
// against a hosted backend (examples/integration_tests.py flyte_client,
// .github/workflows/integration_tests.yml): GITHUB_ACTIONS=true,
// FLYTE_ENDPOINT and a FLYTE_API_KEY minted by `flyte-manager apikey
// create`, insecure=False, the remote image builder, the fixture's default
// project "flyte-sdk"; no config file, and the manager's generated
// certificate trusted through SSL_CERT_FILE only. The API key's endpoint is
// a bare host, so the manager listens on 443 (startAuthManager). A run whose
// parent enqueues children (with its task credential) completes, and the
// fixture's _run_and_wait reads its details and log links, then its outputs.
func TestAuthSDKIntegrationFixturePath(t *testing.T) {
	venv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m := startAuthManager(t, ctx, backends[0], sdkManagerEnv(t)...)
	const fixtureProject = "flyte-sdk" // FLYTE_PROJECT's default in the fixture
	admin, _ := m.newKey("--role", "admin")
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
	req := connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{Id: fixtureProject, Name: fixtureProject}})
	req.Header().Set("Authorization", "Bearer "+bearerOf(t, admin))
	if _, err := projectconnect.NewProjectServiceClient(insecure, m.URL).CreateProject(ctx, req); err != nil {
		t.Fatalf("CreateProject %s: %v", fixtureProject, err)
	}
	key, keyID := m.newKey("--role", "contributor", "--project", fixtureProject, "--domain", testDomain)

	dir := t.TempDir()
	copyTree(t, "testdata/sdk", dir)
	var res struct {
		Run, Phase, Error string
		Output            int
		Logs              []struct{ Name, URI string }
		Actions           []struct{ Name, Phase string }
	}
	driverIn(t, ctx, dir, append(m.keyEnv(key), "GITHUB_ACTIONS=true", "FLYTE_ENDPOINT=dns:///localhost"),
		&res, "drive_fixture.py", "3")
	if res.Phase != "SUCCEEDED" || res.Output != 0+1+4 || len(res.Actions) != 4 {
		t.Fatalf("the fixture's run: %+v\nmanager:\n%s", res, m.output.String())
	}
	for _, l := range res.Logs {
		if l.Name == "" || strings.Contains(l.URI, "{{") || !(strings.HasPrefix(l.URI, "http") || strings.HasPrefix(l.URI, "/")) {
			t.Errorf("log link %+v fails the fixture's _verify_log_links", l)
		}
	}
	out, err := m.flyte(key, "whoami")
	if err != nil || !strings.Contains(out, "apikey:"+keyID) {
		t.Errorf("flyte whoami with the fixture's key: %v\n%s", err, out)
	}
}
