package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/secret"
)

// `secrets rotate-key` replaces the data dir's keyring key (creating the
// keyring on a fresh home) and refuses a fixed secrets.key with advice.
func TestSecretsRotateKey(t *testing.T) {
	home := isolate(t)
	var stdout, stderr bytes.Buffer
	if c := run(context.Background(), []string{"secrets", "rotate-key", "--home", home}, &stdout, &stderr); c != 0 {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
	keys, err := secret.ReadKeyringFile(filepath.Join(home, config.SecretsKeyringFile))
	if err != nil || len(keys) != 1 || !strings.Contains(stdout.String(), "under key "+keys[0].ID) {
		t.Fatalf("keyring %v (%v) after %q", keys, err, stdout.String())
	}
	first := keys[0].ID
	stdout.Reset()
	if c := run(context.Background(), []string{"secrets", "rotate-key", "--home", home}, &stdout, &stderr); c != 0 {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
	keys, _ = secret.ReadKeyringFile(filepath.Join(home, config.SecretsKeyringFile))
	if len(keys) != 1 || keys[0].ID == first || !strings.Contains(stdout.String(), "retired key(s): "+first) {
		t.Fatalf("second rotation: keyring %v, output %q", keys, stdout.String())
	}

	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	t.Setenv("FLYTE_MANAGER_SECRETS_KEY", key)
	stdout.Reset()
	stderr.Reset()
	if c := run(context.Background(), []string{"secrets", "rotate-key", "--home", home}, &stdout, &stderr); c == 0 ||
		!strings.Contains(stderr.String(), "secrets.keyFile") {
		t.Fatalf("rotating a fixed key: exit %d, %q", c, stderr.String())
	}
	stdout.Reset()
	if c := run(context.Background(), []string{"config", "--home", home}, &stdout, &stderr); c != 0 {
		t.Fatal(stderr.String())
	}
	if out := stdout.String() + stderr.String(); strings.Contains(out, key) || !strings.Contains(stdout.String(), "key: REDACTED") {
		t.Fatalf("config shows the secrets key or no redaction:\n%s", out)
	}
}
