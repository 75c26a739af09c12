package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/testkit"
	"fmgr.dev/secret"
)

// withSecrets starts a driver whose attempts get secrets from a real
// Secret service over the harness's database, holding values.
func withSecrets(t *testing.T, h *harness, values map[string]string) *Driver {
	t.Helper()
	home := t.TempDir()
	svc, err := secret.Open(h.db, config.Secrets{}, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secret.OpenKeyring(config.Secrets{}, home) // the same keyring file
	if err != nil {
		t.Fatal(err)
	}
	st := secret.NewStore(h.db, keys)
	for name, v := range values {
		if err := st.Create(context.Background(), secret.ID{Scope: secret.Scope{Domain: "development"}, Name: name}, 0, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	return h.driverWith(func(d *Driver) { d.WithHooks(attempt.Hooks{Secrets: svc.Hook()}) })
}

// The attempt that requests secrets gets them as the SDK reads them: an
// environment variable, and a file (0600, in a 0700 directory of its own
// that FLYTE_SECRETS_DEFAULT_DIR names), gone once the attempt ended;
// another attempt sees none of them.
func TestSecretsReachOnlyTheirAttempt(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		withSecrets(t, h, map[string]string{"api-token": "tok-value-1", "cert": "cert-value-2"})
		script := `printf %s "$API_TOKEN" > "$SHARED/env-value"
printf %s "$FLYTE_SECRETS_DEFAULT_DIR" > "$SHARED/dir"
cat "$FLYTE_SECRETS_DEFAULT_DIR/cert" > "$SHARED/file-value"
printf %s "$CERT_PATH" > "$SHARED/cert-path"
stat -c %a "$FLYTE_SECRETS_DEFAULT_DIR" "$FLYTE_SECRETS_DEFAULT_DIR/cert" | tr '\n' ' ' > "$SHARED/modes"
cat "$FLYTE_SECRETS_DEFAULT_DIR/team/cert" > "$SHARED/grouped-value"
` + succeed
		key := h.run("rsecret", script, taskOpts{secrets: []*core.Secret{
			{Key: "api-token", MountRequirement: core.Secret_ENV_VAR, EnvVar: "API_TOKEN"},
			{Key: "cert", MountRequirement: core.Secret_FILE, EnvVar: "CERT_PATH"},
			{Key: "cert", Group: "Team", MountRequirement: core.Secret_FILE}, // <group>/<key>, lower-cased
		}})
		other := h.run("rplain", `env > "$SHARED/other-env"; `+succeed, taskOpts{})
		h.terminal(key, phase.Succeeded, 30*time.Second)
		h.terminal(other, phase.Succeeded, 30*time.Second)

		dir := h.readShared("dir")
		if got := h.readShared("env-value"); got != "tok-value-1" {
			t.Errorf("API_TOKEN = %q", got)
		}
		if got := h.readShared("file-value"); got != "cert-value-2" {
			t.Errorf("file secret = %q", got)
		}
		if got := h.readShared("grouped-value"); got != "cert-value-2" {
			t.Errorf("file secret with a group = %q", got)
		}
		if got := h.readShared("cert-path"); got != filepath.Join(dir, "cert") {
			t.Errorf("CERT_PATH = %q, want %s", got, filepath.Join(dir, "cert"))
		}
		if got := h.readShared("modes"); got != "700 600 " {
			t.Errorf("modes of the secrets directory and file: %q", got)
		}
		if !strings.HasPrefix(dir, h.workDir) {
			t.Errorf("secrets directory %s is not in the attempt's directory under %s", dir, h.workDir)
		}
		// The directory goes once the attempt's end is recorded, just
		// after the action turned terminal.
		testkit.Eventually(t, "the secrets directory to be removed after the attempt", 30*time.Second, func() bool {
			_, err := os.Stat(dir)
			return errors.Is(err, fs.ErrNotExist)
		})
		if env := h.readShared("other-env"); strings.Contains(env, "tok-value-1") || strings.Contains(env, "FLYTE_SECRETS") {
			t.Errorf("another attempt sees the secrets:\n%s", env)
		}
		if log, _ := os.ReadFile(h.logPath(key, 1)); strings.Contains(string(log), "tok-value-1") || strings.Contains(string(log), "cert-value-2") {
			t.Errorf("the attempt's log shows a secret:\n%s", log)
		}
	})
}

// A task requesting a missing secret fails at once, naming it, without a
// process and without spending its retries.
func TestMissingSecretFailsAtOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		withSecrets(t, h, map[string]string{"present": "v"})
		key := h.run("rmissing", `touch "$SHARED/ran"; `+succeed, taskOpts{retries: 3, secrets: []*core.Secret{
			{Key: "present"}, {Key: "absent-one", EnvVar: "ABSENT"},
		}})
		a := h.terminal(key, phase.Failed, 30*time.Second)
		e := execErr(a.ErrorInfo)
		if e.GetKind() != core.ExecutionError_USER || e.GetCode() != attempt.CodeSecretNotFound ||
			!strings.Contains(e.GetMessage(), `"absent-one"`) || strings.Contains(e.GetMessage(), `"present"`) {
			t.Errorf("error %v, want a user error %s naming the missing secret only", e, attempt.CodeSecretNotFound)
		}
		if n := len(h.attempts(key)); n > 1 {
			t.Errorf("%d attempts, want the retries unspent", n)
		}
		if _, err := os.Stat(h.sharedFile("ran")); err == nil {
			t.Error("the task's process ran")
		}
	})
}
