package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fmgr.dev/internal/config"
)

// kubeconfigWith writes a kubeconfig whose contexts have the given
// namespaces ("" for none); the first context is the current one.
func kubeconfigWith(t *testing.T, namespaces map[string]string, current string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\nusers:\n- name: u\n  user: {}\ncontexts:\n")
	for name, ns := range namespaces {
		b.WriteString("- name: " + name + "\n  context:\n    cluster: c\n    user: u\n")
		if ns != "" {
			b.WriteString("    namespace: " + ns + "\n")
		}
	}
	b.WriteString("current-context: " + current + "\n")
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFromFlags(t *testing.T) {
	kc := kubeconfigWith(t, map[string]string{"dev": "team-a", "bare": ""}, "dev")
	home := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" = accepted
		check   func(t *testing.T, c *config.Config)
	}{
		{"defaults on the current context", nil, "", func(t *testing.T, c *config.Config) {
			k := c.Executor.Kubernetes
			if c.Executor.Type != config.ExecutorKubernetes || k.Namespace != "team-a" || !k.SharedFileStorage || k.Kubeconfig != kc {
				t.Errorf("executor %+v", c.Executor)
			}
			if c.Server.Port != 8090 || c.Server.Host != "127.0.0.1" {
				t.Errorf("server %+v", c.Server)
			}
			if c.Home != home || !strings.HasPrefix(c.Database.DSN, "sqlite://"+home) || !strings.HasPrefix(c.Storage.URL, "file://"+home) {
				t.Errorf("home %s, database %s, storage %s", c.Home, c.Database.DSN, c.Storage.URL)
			}
		}},
		{"a context without a namespace means default", []string{"--context", "bare"}, "", func(t *testing.T, c *config.Config) {
			if k := c.Executor.Kubernetes; k.Namespace != "default" || k.Context != "bare" {
				t.Errorf("executor.kubernetes %+v", k)
			}
		}},
		{"--namespace wins", []string{"--namespace", "mine"}, "", func(t *testing.T, c *config.Config) {
			if ns := c.Executor.Kubernetes.Namespace; ns != "mine" {
				t.Errorf("namespace %q", ns)
			}
		}},
		{"the endpoint is a known host", []string{"--endpoint", "fm.flyte.svc:8090", "--host", "0.0.0.0"}, "", func(t *testing.T, c *config.Config) {
			if c.Executor.Kubernetes.Endpoint != "fm.flyte.svc:8090" || !slices.Contains(c.Server.AllowedHosts, "fm.flyte.svc:8090") {
				t.Errorf("endpoint %q, allowed hosts %q", c.Executor.Kubernetes.Endpoint, c.Server.AllowedHosts)
			}
		}},
		{"file storage the Pods do not share is refused", []string{"--shared-storage=false"}, "--storage", nil},
		{"an unknown context is an error", []string{"--context", "nope"}, "nope", nil},
		{"stray arguments", []string{"start"}, "unexpected arguments", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse(append([]string{"--kubeconfig", kc, "--home", home}, tc.args...), io.Discard)
			var c *config.Config
			if err == nil {
				c, err = f.config()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			case tc.wantErr != "":
				return
			}
			tc.check(t, c)
		})
	}
}

// Usage errors exit 2, with the reason; --help exits 0.
func TestUsage(t *testing.T) {
	if err := run(t.Context(), []string{"--port", "x"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("bad flag: %v, want a usage error", err)
	}
	if err := run(t.Context(), []string{"--help"}, io.Discard, io.Discard); err != nil {
		t.Errorf("--help: %v", err)
	}
}
