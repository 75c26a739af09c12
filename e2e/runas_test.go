package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	secretpb "fmgr.dev/gen/go/flyteidl2/secret"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/internal/mgrproc"
	"fmgr.dev/internal/testkit"
)

// Scenario (issue #21 item 3): a manager running as root runs each attempt
// as a uid of its own (executor.local.runAs, default range). Two attempts
// of two projects run at once, each with a secret file of its project's;
// each tries to read the other's secret file and its directory, the other's
// /proc/<pid>/environ, the other's working directory, the manager's
// database file (SQLite), signing key and secrets keyring: every one is
// refused (the manager's files may instead be absent: a home others may
// not enter is hidden from attempts). Each reads its own secret and its own environ, or the refusals
// prove nothing. On the old code, where every attempt ran as the manager's
// user (root), every read succeeds.
func TestAttemptsRunAsTheirOwnUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attempts run as other users only under a manager running as root")
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			// SQLite in the manager's home, where it is by default.
			home, dsn := testkit.TaskDir(t), ""
			if b.name == "sqlite" {
				dsn = "sqlite://" + filepath.Join(home, "flyte-manager.db")
			} else {
				dsn = b.dsn(t)
			}
			m := startManagerWith(t, mgrproc.Options{Bin: managerBin, Home: home, DSN: dsn, Env: sdkManagerEnv(t)})
			testAttemptsRunAsTheirOwnUsers(t, m, b.name == "sqlite")
		})
	}
}

func testAttemptsRunAsTheirOwnUsers(t *testing.T, m *manager, sqlite bool) {
	ctx := scenarioContext(t, 8*time.Minute)
	projects := [2]string{"e2e-runas-a", "e2e-runas-b"}
	client := secretconnect.NewSecretServiceClient(rpcClient, m.URL)
	var digests [2]string
	for i, project := range projects {
		value := canary(t, "runas-"+project)
		digests[i] = digest(value)
		_, err := client.CreateSecret(ctx, connect.NewRequest(&secretpb.CreateSecretRequest{
			Id:         &secretpb.SecretIdentifier{Name: "e2e-runas-secret", Domain: testDomain, Project: project},
			SecretSpec: &secretpb.SecretSpec{Value: &secretpb.SecretSpec_StringValue{StringValue: value}},
		}))
		if err != nil {
			t.Fatalf("creating the secret of %s: %v", project, err)
		}
	}
	db := ""
	if sqlite {
		db = strings.TrimPrefix(m.DSN, "sqlite://")
		if _, err := os.Stat(db); err != nil {
			t.Fatalf("the manager's database file: %v", err)
		}
	}
	for _, f := range []string{"signing.key", "secrets.keyring"} {
		if _, err := os.Stat(filepath.Join(m.Home, f)); err != nil {
			t.Fatalf("the manager's %s: %v", f, err)
		}
	}
	shared := testkit.TaskDir(t)
	res := map[string]struct{ Run, Phase, Output, Error string }{}
	driver(t, ctx, &res, "drive_runas.py", sdkEndpoint(m), shared, m.Home, db, projects[0], digests[0], projects[1], digests[1])

	want := map[string]string{
		"uid": "own", "own_secret": "matches", "own_environ": "read",
		"other_secret": "refused", "other_secret_dir": "refused", "other_environ": "refused", "other_cwd": "refused",
		"database": "refused", "signing_key": "refused", "keyring": "refused",
	}
	if !sqlite {
		want["database"] = "n/a"
	}
	// The manager's own files may also be absent from the attempt's view
	// (its home hidden by its mount namespace).
	managers := map[string]bool{"database": true, "signing_key": true, "keyring": true}
	for _, project := range projects {
		r := res[project]
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("the run %s of %s is %s: %s", r.Run, project, r.Phase, r.Error)
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(r.Output), &got); err != nil {
			t.Fatalf("the output of %s: %q: %v", project, r.Output, err)
		}
		for k, v := range want {
			hidden := v == "refused" && got[k] == "absent" && managers[k]
			if got[k] != v && !hidden {
				t.Errorf("%s: %s is %q, want %q (all: %v)", project, k, got[k], v, got)
			}
		}
	}
}
