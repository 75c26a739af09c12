package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Runs with auth.mode required, on both databases: a parent fans out its
// children with the credential its attempt is given (before task
// credentials, it could not enqueue them: every call of the task process
// was UNAUTHENTICATED), and a task's credential reads its own run but not
// another run, the runs list or another project.
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
		})
	}
}
