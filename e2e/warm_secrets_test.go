package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	secretpb "fmgr.dev/gen/go/flyteidl2/secret"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
)

// Scenario (issue #21): with warm start on, as it is by default, the
// secrets a task of one project holds in its environment never reach a
// task of another project that the same warm server starts later. The
// holder's secrets are made with the SecretService for its project only;
// a later task of another project scans its whole memory for the token,
// and for its own project's secret (which it must find, or the scan proves
// nothing). A manager of its own per backend: no other scenario's attempts
// pass through its warm server between the two.
func TestWarmStartSecrets(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			testWarmStartSecrets(t, startSDKManager(t, b.dsn(t)))
		})
	}
}

func testWarmStartSecrets(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	holder, scanner := "e2e-warm-holder", "e2e-warm-scanner"
	token, control := canary(t, "warm-token"), canary(t, "warm-control")
	client := secretconnect.NewSecretServiceClient(rpcClient, m.URL)
	create := func(project, name, value string) {
		t.Helper()
		_, err := client.CreateSecret(ctx, connect.NewRequest(&secretpb.CreateSecretRequest{
			Id:         &secretpb.SecretIdentifier{Name: name, Domain: testDomain, Project: project},
			SecretSpec: &secretpb.SecretSpec{Value: &secretpb.SecretSpec_StringValue{StringValue: value}},
		}))
		if err != nil {
			t.Fatalf("creating %s/%s: %v", project, name, err)
		}
	}
	// A certificate bundle's worth of text before the token (see
	// wf_warm_secrets.py): the old warm server's freed copies of the
	// holder's start message then keep the token where the scanner finds
	// it every time, not now and then.
	create(holder, "e2e-warm-bundle", bundleText(t, 100<<10))
	create(holder, "e2e-warm-token", token)
	create(scanner, "e2e-warm-control", control)

	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", m.PID()))
	if err != nil {
		t.Fatal(err)
	}
	managerName := strings.TrimSpace(string(comm))
	halves := func(v string) [2]string { return [2]string{v[:len(v)/2], v[len(v)/2:]} }
	probe, err := json.Marshal(map[string][2]string{"token": halves(token), "control": halves(control)})
	if err != nil {
		t.Fatal(err)
	}
	type taskRun struct{ Run, Phase, Output, Error string }
	var res struct {
		Holds []taskRun
		Scan  taskRun
	}
	driver(t, ctx, &res, "drive_warm_secrets.py", sdkEndpoint(m), holder, scanner, managerName, string(probe))

	last := res.Holds[len(res.Holds)-1]
	if last.Phase != "SUCCEEDED" {
		t.Fatalf("run %s of the holder is %s: %s", last.Run, last.Phase, last.Error)
	}
	if last.Output == managerName || strings.Contains(last.Output, " ") {
		t.Fatalf("no run of the holder in %d was warm-started (its parent: %q)", len(res.Holds), last.Output)
	}
	if res.Scan.Phase != "SUCCEEDED" {
		t.Fatalf("the scanner's run %s is %s: %s", res.Scan.Run, res.Scan.Phase, res.Scan.Error)
	}
	var scan map[string]string
	if err := json.Unmarshal([]byte(res.Scan.Output), &scan); err != nil {
		t.Fatalf("the scanner's output %q: %v", res.Scan.Output, err)
	}
	if scan["parent"] != last.Output {
		t.Fatalf("the scanner's parent is %q, not the warm server %q: it was not warm-started, so this proves nothing", scan["parent"], last.Output)
	}
	if scan["control"] != "found" {
		t.Errorf("the scanner does not find its own project's secret in its memory (%v): the scan does not work", scan)
	}
	if scan["token"] != "absent" {
		t.Errorf("a task of project %s finds the secret token of a task of project %s in its memory (%v)", scanner, holder, scan)
	}
}

// bundleText is about n bytes of random base32 lines, like a PEM bundle.
func bundleText(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(rand.Text())
		b.WriteString("\n")
	}
	return b.String()
}
