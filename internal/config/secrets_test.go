package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretsKeySources(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	const key = "c2VjcmV0cy1rZXktMzItYnl0ZXMtbG9uZy0uLi4uLi4=" // 32 bytes

	// The key from the environment: no keyring file is derived.
	t.Setenv("FLYTE_MANAGER_SECRETS_KEY", key)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Secrets.Key != key || c.Secrets.KeyFile != "" {
		t.Errorf("env key: key set %v, keyFile %q", c.Secrets.Key == key, c.Secrets.KeyFile)
	}

	// A key file from a file, made absolute.
	t.Setenv("FLYTE_MANAGER_SECRETS_KEY", "")
	f := writeFile(t, dir, "k.yaml", "secrets:\n  keyFile: keys/ring\n")
	c, err = Load(Sources{Files: []string{f}})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(c.Secrets.KeyFile) || !strings.HasSuffix(c.Secrets.KeyFile, "keys/ring") {
		t.Errorf("keyFile = %q, want an absolute path ending in keys/ring", c.Secrets.KeyFile)
	}
}

func TestSecretsKeyValidation(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"short":    {"secrets:\n  key: c2hvcnQ=\n", "secrets.key: must be a base64-encoded 32-byte key"},
		"not b64":  {"secrets:\n  key: 'not base64 at all!'\n", "secrets.key: is not base64"},
		"both set": {"secrets:\n  key: c2VjcmV0cy1rZXktMzItYnl0ZXMtbG9uZy0uLi4uLi4=\n  keyFile: /k\n", "set either secrets.key or secrets.keyFile"},
	} {
		t.Run(name, func(t *testing.T) {
			f := writeFile(t, dir, name+".yaml", tc.yaml)
			_, err := Load(Sources{Files: []string{f}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "c2hvcnQ") || strings.Contains(err.Error(), "not base64 at all") {
				t.Errorf("the error echoes the key: %v", err)
			}
		})
	}
	for _, ok := range []string{
		"c2VjcmV0cy1rZXktMzItYnl0ZXMtbG9uZy0uLi4uLi4=", // std, padded
		"c2VjcmV0cy1rZXktMzItYnl0ZXMtbG9uZy0uLi4uLi4",  // raw
	} {
		if _, err := ParseSecretKey(ok); err != nil {
			t.Errorf("ParseSecretKey(%q): %v", ok, err)
		}
	}
}
