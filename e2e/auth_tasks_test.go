package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
)

// bearerOf is the bearer token an API key's holder may send itself
// ("<key id>:<secret>", as with admin.authType ExternalCommand).
func bearerOf(t *testing.T, key string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(raw), ":", 4)
	if len(parts) != 4 {
		t.Fatalf("an API key decodes to %d parts", len(parts))
	}
	return parts[1] + ":" + parts[2]
}

// Runs with auth.mode required, on both databases: a parent fans out its
// children with the credential its attempt is given (before task
// credentials, it could not enqueue them: every call of the task process
// was UNAUTHENTICATED), and a task's credential reads its own run but not
// another run, the runs list or another project. The run's executed_by is
// the key that created it; a viewer's key sees only its project in project
// lists and kubectl (API keys are kubectl tokens too), and whoami answers
// it.
func TestAuthRunsWithTaskCredentials(t *testing.T) {
	venv(t)
	const width = 4
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			m := startAuthManager(t, ctx, b, sdkManagerEnv(t)...)
			key, keyID := m.newKey("--role", "contributor", "--project", testProject, "--domain", testDomain)
			var res struct {
				Fanout struct {
					Run        string
					Phase      string
					Output     int
					Error      string
					Actions    []struct{ Name, Phase string }
					ExecutedBy string `json:"executed_by"`
				}
				Probe struct {
					Phase  string
					Error  string
					Output map[string]string
				}
			}
			driverWith(t, ctx, append(m.keyEnv(key), m.ClientEnv()...), &res, "drive_taskcreds.py", key, "4", "otherproject")
			f := res.Fanout
			if f.Phase != "SUCCEEDED" || f.Output != 0+1+4+9 || len(f.Actions) != width+1 {
				t.Fatalf("fan-out under auth: %+v\nmanager:\n%s", f, m.output.String())
			}
			if f.ExecutedBy != "apikey:"+keyID {
				t.Errorf("the run's executed_by is %q, want the key's subject apikey:%s", f.ExecutedBy, keyID)
			}
			p := res.Probe
			if p.Phase != "SUCCEEDED" {
				t.Fatalf("probe: %+v", p)
			}
			if p.Output["own run"] != "ok" {
				t.Errorf("a task could not read its own run: %s", p.Output["own run"])
			}
			for _, what := range []string{"other run", "list runs", "other project"} {
				if got := p.Output[what]; !strings.Contains(got, "PERMISSION_DENIED") && !strings.Contains(strings.ToLower(got), "permission") {
					t.Errorf("a task's credential, %s: %q, want a permission denial", what, got)
				}
			}

			// A viewer of the project: whoami answers it, project lists
			// show only its project, kubectl with its token only its runs.
			admin, _ := m.newKey("--role", "admin")
			insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
			req := connect.NewRequest(&project.CreateProjectRequest{Project: &project.Project{Id: "otherproject", Name: "otherproject"}})
			req.Header().Set("Authorization", "Bearer "+bearerOf(t, admin))
			if _, err := projectconnect.NewProjectServiceClient(insecure, m.URL).CreateProject(ctx, req); err != nil {
				t.Fatalf("CreateProject with an admin key: %v", err)
			}
			viewer, viewerID := m.newKey("--role", "viewer", "--project", testProject, "--domain", testDomain)
			if out, err := m.flyte(viewer, "whoami"); err != nil || !strings.Contains(out, "apikey:"+viewerID) {
				t.Errorf("flyte whoami as the viewer: %v\n%s", err, out)
			}
			if out, err := m.flyte(viewer, "get", "project"); err != nil || !strings.Contains(out, testProject) || strings.Contains(out, "otherproject") {
				t.Errorf("flyte get project as a viewer of %s: %v\n%s", testProject, err, out)
			}
			other, _ := m.newKey("--role", "viewer", "--project", "otherproject")
			k := newKubectl(t, m.manager)
			if out := k.run("--token", bearerOf(t, viewer), "get", "taskactions", "-A"); !strings.Contains(out, f.Run) {
				t.Errorf("kubectl with the viewer's key does not list the run %s:\n%s", f.Run, out)
			}
			if out := k.run("--token", bearerOf(t, other), "get", "taskactions", "-A"); strings.Contains(out, f.Run) {
				t.Errorf("kubectl with another project's key lists the run %s:\n%s", f.Run, out)
			}
		})
	}
}
