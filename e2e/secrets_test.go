package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/testcluster"
	secretpb "fmgr.dev/gen/go/flyteidl2/secret"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/testkit"
)

// Scenario: secrets made with `flyte create secret` reach the tasks that
// request them (an environment variable and a mounted file), and their
// values appear nowhere else: no API response, no log line, no error, no
// database column, no file the manager keeps, no Pod spec. After
// `flyte-manager secrets rotate-key`, run beside the manager, the task
// still reads them. A task requesting a missing secret fails at once with
// a message naming it, its retries unspent. `flyte delete secret` deletes.
func testSecrets(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 12*time.Minute)
	token, cert := canary(t, "tok"), canary(t, "cert")
	values := []string{token, cert}
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	mustFlyte(t, ctx, dir, "create", "secret", "e2e-token", "--value", token)
	mustFlyte(t, ctx, dir, "create", "secret", "e2e-cert", "--value", cert)
	if out, err := flyteCLI(t, ctx, dir, "create", "secret", "e2e-token", "--value", "again"); err == nil || !strings.Contains(out, "already exists") {
		t.Errorf("creating e2e-token twice: %v\n%s", err, out)
	}
	listed := mustFlyte(t, ctx, dir, "get", "secret")
	if !strings.Contains(listed, "e2e-token") || !strings.Contains(listed, "e2e-cert") {
		t.Errorf("flyte get secret does not list both secrets:\n%s", listed)
	}
	shown := listed + mustFlyte(t, ctx, dir, "get", "secret", "e2e-token")

	type secretRun struct {
		Run, Phase     string
		StatusAttempts int `json:"status_attempts"`
		Attempts       []attemptInfo
		Error          string
		Output         map[string]string
	}
	var res struct{ Read, Missing secretRun }
	counter := testkit.TaskDir(t)
	driver(t, ctx, &res, "drive_secrets.py", sdkEndpoint(m), counter)
	checkRead := func(r secretRun) {
		t.Helper()
		if r.Phase != "SUCCEEDED" {
			t.Fatalf("run %s reading the secrets is %s: %s", r.Run, r.Phase, r.Error)
		}
		if r.Output["token"] != digest(token) {
			t.Errorf("run %s: the task's E2E_TOKEN has digest %s, want that of the secret", r.Run, r.Output["token"])
		}
		if r.Output["cert"] != digest(cert) {
			t.Errorf("run %s: the task's mounted e2e-cert: %s, want the secret's digest", r.Run, r.Output["cert"])
		}
	}
	checkRead(res.Read)

	t.Run("missing", func(t *testing.T) {
		r := res.Missing
		if r.Phase != "FAILED" || !strings.Contains(r.Error, `"e2e-missing-secret"`) {
			t.Errorf("run %s requesting a missing secret is %s with %q, want FAILED naming it", r.Run, r.Phase, r.Error)
		}
		if r.StatusAttempts > 1 || len(r.Attempts) > 1 {
			t.Errorf("run %s: %d attempts (%d in the history), want its 3 retries unspent", r.Run, r.StatusAttempts, len(r.Attempts))
		}
		if _, err := os.Stat(filepath.Join(counter, "ran")); err == nil {
			t.Error("the task requesting a missing secret ran")
		}
	})

	// Rotation beside the running manager, which must go on reading them.
	rotate := exec.CommandContext(ctx, managerBin, "secrets", "rotate-key", "--home", m.Home, "--db", m.DSN)
	out, err := rotate.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sealed 2 secret(s) again under key") {
		t.Fatalf("flyte-manager secrets rotate-key: %v\n%s", err, out)
	}
	var again struct{ Read secretRun }
	driver(t, ctx, &again, "drive_secrets.py", sdkEndpoint(m), counter, "read-only")
	checkRead(again.Read)

	// Nowhere else: the API's answers about secrets, what the CLI printed,
	// the runs' reports (outputs, errors, attempts), the manager's log.
	client := secretconnect.NewSecretServiceClient(rpcClient, m.URL)
	// `flyte create secret` without --project/--domain makes org-wide
	// secrets, which every project's tasks get (the lookup cascades).
	list, err := client.ListSecrets(ctx, connect.NewRequest(&secretpb.ListSecretsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	get, err := client.GetSecret(ctx, connect.NewRequest(&secretpb.GetSecretRequest{Id: &secretpb.SecretIdentifier{Name: "e2e-cert"}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.GetSecrets()) < 2 || get.Msg.GetSecret().GetId().GetName() != "e2e-cert" {
		t.Errorf("ListSecrets %v, GetSecret %v: want the two secrets", list.Msg.GetSecrets(), get.Msg.GetSecret())
	}
	wire := append(mustMarshal(t, list.Msg), mustMarshal(t, get.Msg)...)
	report := fmt.Sprintf("%+v %+v", res, again)
	logs := m.output.String()
	for _, v := range values {
		for what, text := range map[string]string{"a SecretService answer": string(wire), "flyte get secret": shown,
			"the runs' reports": report, "the manager's log": logs} {
			if strings.Contains(text, v) {
				t.Errorf("%s shows a secret value", what)
			}
		}
	}
	checkNoValueStored(t, ctx, m, values)

	// `flyte delete secret` removes it; a second delete finds nothing.
	mustFlyte(t, ctx, dir, "delete", "secret", "e2e-cert")
	if out, err := flyteCLI(t, ctx, dir, "get", "secret", "e2e-cert"); err == nil || !strings.Contains(strings.ToLower(out), "not found") {
		t.Errorf("flyte get secret after delete: %v\n%s", err, out)
	}
	if out, err := flyteCLI(t, ctx, dir, "delete", "secret", "e2e-cert"); err == nil || !strings.Contains(strings.ToLower(out), "not found") {
		t.Errorf("deleting e2e-cert twice: %v\n%s", err, out)
	}
}

// checkNoValueStored looks for values in every file under the manager's
// home (blobs, the executor's attempt directories: secret files must be
// gone once the attempts ended), in its SQLite database files or a dump of
// its PostgreSQL database, and on kubernetes in every Pod spec.
func checkNoValueStored(t *testing.T, ctx context.Context, m *manager, values []string) {
	t.Helper()
	if msg := testkit.Poll(time.Minute, 500*time.Millisecond, func() string {
		var found []string
		_ = filepath.WalkDir(m.Home, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(path)
			if err == nil && containsAny(data, values) {
				found = append(found, path)
			}
			return nil
		})
		if len(found) > 0 {
			return fmt.Sprintf("a secret value is in plain text in %v", found)
		}
		return ""
	}); msg != "" {
		t.Error(msg)
	}
	if path, ok := strings.CutPrefix(m.DSN, "sqlite://"); ok {
		// The database and its write-ahead log and index, wherever the DSN
		// put them (the harness keeps them outside the home).
		var all []byte
		for _, f := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
			data, err := os.ReadFile(f)
			if err == nil && containsAny(data, values) {
				t.Errorf("a secret value is in plain text in %s", f)
			}
			all = append(all, data...)
		}
		if !bytes.Contains(all, []byte("CREATE TABLE secrets")) {
			t.Fatalf("%s (and its log) has no secrets table; the check would prove nothing", path)
		}
	}
	if strings.HasPrefix(m.DSN, "postgres") {
		bin, err := pgtest.BinDir()
		if err != nil {
			t.Fatal(err)
		}
		dump, err := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--data-only", "--dbname", m.DSN).Output()
		if err != nil {
			t.Fatalf("pg_dump: %v", err)
		}
		if !bytes.Contains(dump, []byte("COPY public.secrets")) {
			t.Fatalf("the dump has no secrets table; the check would prove nothing")
		}
		if containsAny(dump, values) {
			t.Error("a secret value is in plain text in the PostgreSQL database")
		}
	}
	if m.Kubernetes {
		pods, err := exec.CommandContext(ctx, testcluster.Kubectl(), "--kubeconfig", m.Kubeconfig, "get", "pods", "-A", "-o", "yaml").Output()
		if err != nil {
			t.Fatalf("kubectl get pods: %v", err)
		}
		if !bytes.Contains(pods, []byte("secretKeyRef")) {
			t.Errorf("no Pod refers to its secrets by secretKeyRef:\n%s", pods)
		}
		if containsAny(pods, values) {
			t.Error("a secret value is in a Pod spec")
		}
	}
}

// canary is a value no run produces by chance.
func canary(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func containsAny(data []byte, values []string) bool {
	for _, v := range values {
		if bytes.Contains(data, []byte(v)) {
			return true
		}
	}
	return false
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
