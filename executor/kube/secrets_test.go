package kube

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
	"fmgr.dev/secret"
)

// secretsHarness is a harness whose driver gets secrets from a real Secret
// service over its database, holding values (domain-wide in development).
func secretsHarness(t *testing.T, values map[string]string) *harness {
	t.Helper()
	return newHarnessWith(t, dbtest.SQLiteDSN(t), secretHooks(t, values))
}

// secretHooks builds a Secret service's hooks over a harness's database,
// holding values (domain-wide in development).
func secretHooks(t *testing.T, values map[string]string) func(*gorm.DB) attempt.Hooks {
	home := t.TempDir()
	return func(g *gorm.DB) attempt.Hooks {
		svc, err := secret.Open(g, config.Secrets{}, home, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := secret.OpenKeyring(config.Secrets{}, home) // the same keyring file
		if err != nil {
			t.Fatal(err)
		}
		st := secret.NewStore(g, keys)
		for name, v := range values {
			if err := st.Create(context.Background(), secret.ID{Scope: secret.Scope{Domain: "development"}, Name: name}, 0, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		return attempt.Hooks{Secrets: svc.Hook()}
	}
}

// A Pod gets its attempt's secrets from a Kubernetes Secret the manager
// owns, by reference (secretKeyRef, a secret volume at /etc/flyte/secrets):
// no value is in the Pod spec, and the Secret goes once the Pod ended.
func TestSecretsByReference(t *testing.T) {
	h := secretsHarness(t, map[string]string{"api-token": "tok-value-1", "cert": "cert-value-2"})
	release := filepath.Join(h.fixtures, "release")
	script := `printf %s "$API_TOKEN" > "$FIXTURES/env-value"
cat "$FLYTE_SECRETS_DEFAULT_DIR/cert" > "$FIXTURES/file-value"
printf %s "$FLYTE_SECRETS_DEFAULT_DIR" > "$FIXTURES/dir"
while [ ! -e "$FIXTURES/release" ]; do sleep 0.1; done
` + succeed
	key := h.run("rsecret", script, taskOpts{secrets: []*core.Secret{
		{Key: "api-token", MountRequirement: core.Secret_ENV_VAR, EnvVar: "API_TOKEN"},
		{Key: "cert", MountRequirement: core.Secret_FILE},
	}})
	h.eventually("the task to read its environment", func() bool {
		_, err := os.Stat(filepath.Join(h.fixtures, "dir"))
		return err == nil
	})
	pod, err := h.pod(key, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(pod)
	if strings.Contains(string(spec), "tok-value-1") || strings.Contains(string(spec), "cert-value-2") {
		t.Fatalf("a secret value is in the Pod spec:\n%s", spec)
	}
	s := &corev1.Secret{}
	if err := h.k.Get(h.ctx, client.ObjectKey{Namespace: pod.Namespace, Name: secretNameOf(pod.Name)}, s); err != nil {
		t.Fatal(err)
	}
	if s.Labels[LabelManaged] != managedBy || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "TaskAction" {
		t.Errorf("the Secret's labels %v and owners %v, want managed-by and its TaskAction", s.Labels, s.OwnerReferences)
	}
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == secretsVolume {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != s.Name || len(vol.Secret.Items) != 1 ||
		vol.Secret.Items[0].Path != "cert" || string(s.Data[vol.Secret.Items[0].Key]) != "cert-value-2" {
		t.Fatalf("secret volume %+v over Secret data keys %v", vol, len(s.Data))
	}
	ctr := pod.Spec.Containers[taskContainer(pod)]
	mounted := false
	for _, m := range ctr.VolumeMounts {
		mounted = mounted || (m.Name == secretsVolume && m.MountPath == contract.SecretsMountPath && m.ReadOnly)
	}
	if !mounted {
		t.Errorf("volume mounts %+v, want %s read-only at %s", ctr.VolumeMounts, secretsVolume, contract.SecretsMountPath)
	}
	dirSet := false
	for _, e := range ctr.Env {
		dirSet = dirSet || (e.Name == contract.EnvSecretsDefaultDir && e.Value == contract.SecretsMountPath)
	}
	if !dirSet {
		t.Errorf("the Pod's env lacks %s=%s", contract.EnvSecretsDefaultDir, contract.SecretsMountPath)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.terminal(key, phase.Succeeded)
	if got, _ := os.ReadFile(filepath.Join(h.fixtures, "env-value")); string(got) != "tok-value-1" {
		t.Errorf("API_TOKEN = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(h.fixtures, "file-value")); string(got) != "cert-value-2" {
		t.Errorf("the file secret read %q", got)
	}
	h.eventually("the attempt's Secret to be deleted", func() bool {
		err := h.k.Get(h.ctx, client.ObjectKeyFromObject(s), &corev1.Secret{})
		return apierrors.IsNotFound(err)
	})
}

// A missing secret fails the action before any Pod exists, naming it.
func TestMissingSecretCreatesNoPod(t *testing.T) {
	h := secretsHarness(t, nil)
	key := h.run("rmissing", succeed, taskOpts{retries: 2, secrets: []*core.Secret{{Key: "absent-one"}}})
	a := h.terminal(key, phase.Failed)
	if es := v1.ErrorStateOf(a.ErrorInfo); es == nil || !strings.Contains(es.Message, `"absent-one"`) || es.Code != attempt.CodeSecretNotFound {
		t.Errorf("error %+v, want %s naming the missing secret", es, attempt.CodeSecretNotFound)
	}
	if _, err := h.pod(key, 1); !apierrors.IsNotFound(err) {
		t.Errorf("a Pod exists: %v", err)
	}
}

// With auth on, a Pod gets its attempt's credential like its secrets, by
// reference: the task reads it through the SDK's auth command (which
// prints FLYTE_MANAGER_TASK_TOKEN), and the Pod spec holds no credential.
func TestTaskCredentialByReference(t *testing.T) {
	h := newHarnessWith(t, dbtest.SQLiteDSN(t), func(*gorm.DB) attempt.Hooks {
		return attempt.Hooks{Credential: &attempt.CredentialAccess{TLS: true, Mint: func(a *store.Action, _ time.Duration) string {
			return "cred-" + a.RunName
		}}}
	})
	script := `printenv FLYTE_MANAGER_TASK_TOKEN > "$FIXTURES/token"
printf '%s %s' "$FLYTE_AUTH_TYPE" "$_U_INSECURE" > "$FIXTURES/auth"
` + succeed
	key := h.run("rcred", script, taskOpts{})
	h.terminal(key, phase.Succeeded)
	if got, _ := os.ReadFile(filepath.Join(h.fixtures, "token")); strings.TrimSpace(string(got)) != "cred-rcred" {
		t.Errorf("the task's credential %q, want cred-rcred", got)
	}
	if got, _ := os.ReadFile(filepath.Join(h.fixtures, "auth")); string(got) != "ExternalCommand false" {
		t.Errorf("FLYTE_AUTH_TYPE and _U_INSECURE: %q", got)
	}
	pod, err := h.pod(key, 1)
	if err != nil {
		t.Fatal(err)
	}
	if spec, _ := json.Marshal(pod); strings.Contains(string(spec), "cred-rcred") {
		t.Fatalf("the credential is in the Pod spec:\n%s", spec)
	}
}
