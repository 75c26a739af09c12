package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"fmgr.dev/kubeapi"
)

// The sandbox's configuration: its defaults (home on the storage volume,
// 0.0.0.0:30080, the kube API on 0.0.0.0:6443, the S3 endpoint on
// 0.0.0.0:30002 with the SDK's sandbox key, the hosts a published port
// is reached by, the SDK's Python), config.yaml merged over them key by key,
// FLYTE_DEV's debug logging; and the kubeconfig the devbox contract asks for
// (context flyte-devbox, namespace flyte, a token that works, revoked at the
// next start).
func TestSandboxConfigAndKubeconfig(t *testing.T) {
	isolate(t)
	storage, configDir, bin := filepath.Join(t.TempDir(), "storage"), t.TempDir(), t.TempDir()
	wantAuth := "off" // explicitly, warned about: its listeners are beyond loopback
	load := func(dev bool) (host string, port int, listen, level, python string, allowed []string) {
		t.Helper()
		g := &globalFlags{}
		cfg, err := loadSandboxConfig(newSandboxCmd(g), g, storage, configDir, bin, dev)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Home != storage || !cfg.KubeAPI.Enabled {
			t.Errorf("home %q, kubeAPI.enabled %v", cfg.Home, cfg.KubeAPI.Enabled)
		}
		if e := cfg.Storage.S3Endpoint; e.Listen != "0.0.0.0:30002" || e.AccessKeyID != "minio" || e.SecretAccessKey != "miniostorage" || e.TaskLocations != "s3" {
			t.Errorf("storage.s3Endpoint %+v, want 0.0.0.0:30002 with S3.for_sandbox()'s key, tasks on s3 locations", e)
		}
		if a := cfg.Apps; a.Listen != "0.0.0.0:30081" || a.PublicURL != "http://localhost:30081/apps/{project}/{domain}/{name}/" {
			t.Errorf("apps %+v, want them on 0.0.0.0:30081 with public URLs there", a)
		}
		if required := wantAuth == "required"; cfg.Auth.Mode != wantAuth || cfg.Auth.Required() != required || (len(cfg.AuthOffButExposed()) == 0) == !required {
			t.Errorf("auth.mode %q (required %v, warned about %v), want %s", cfg.Auth.Mode, cfg.Auth.Required(), cfg.AuthOffButExposed(), wantAuth)
		}
		if cfg.Executor.Local.RunAs.Mode != "manager" {
			t.Errorf("executor.local.runAs.mode %q, want manager", cfg.Executor.Local.RunAs.Mode)
		}
		return cfg.Server.Host, cfg.Server.Port, cfg.KubeAPI.Listen, cfg.Log.Level, cfg.Executor.Local.Python, cfg.Server.AllowedHosts
	}
	host, port, listen, level, python, allowed := load(false)
	if host != "0.0.0.0" || port != 30080 || listen != "0.0.0.0:6443" || level != "info" || python != bin ||
		!slices.Contains(allowed, "localhost") || !slices.Contains(allowed, "host.docker.internal") {
		t.Errorf("defaults: %s:%d, kube API %s, log %s, python %s, allowed %q", host, port, listen, level, python, allowed)
	}
	if _, _, _, level, _, _ = load(true); level != "debug" {
		t.Errorf("FLYTE_DEV: log level %s", level)
	}

	yamlText := "server:\n  allowedHosts: [sandbox.example]\nkubeAPI:\n  listen: 127.0.0.1:16443\nauth:\n  mode: required\n"
	wantAuth = "required"
	if err := os.WriteFile(filepath.Join(configDir, "config.yaml"), []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, listen, _, _, allowed = load(false)
	if host != "0.0.0.0" || port != 30080 || listen != "127.0.0.1:16443" || !slices.Equal(allowed, []string{"sandbox.example"}) {
		t.Errorf("config.yaml not merged over the defaults: %s:%d, kube API %s, allowed %q", host, port, listen, allowed)
	}

	g := &globalFlags{}
	cfg, err := loadSandboxConfig(newSandboxCmd(g), g, storage, configDir, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Prepare(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), ".kube", "kubeconfig")
	token := func() string {
		t.Helper()
		if err := writeSandboxKubeconfig(cfg, out); err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.LoadFromFile(out)
		if err != nil {
			t.Fatal(err)
		}
		c := kc.Contexts[kc.CurrentContext]
		if kc.CurrentContext != "flyte-devbox" || c == nil || c.Namespace != "flyte" ||
			kc.Clusters[c.Cluster].Server != "https://127.0.0.1:16443" || len(kc.Clusters[c.Cluster].CertificateAuthorityData) == 0 {
			b, _ := os.ReadFile(out)
			t.Fatalf("kubeconfig:\n%s", b)
		}
		return kc.AuthInfos[c.AuthInfo].Token
	}
	t1 := token()
	tokens := kubeapi.NewTokens(filepath.Join(storage, "kubeapi"))
	if !tokens.Valid(t1) {
		t.Fatal("the kubeconfig's token is not valid")
	}
	if t2 := token(); tokens.Valid(t1) || !tokens.Valid(t2) {
		t.Error("a restart's kubeconfig did not replace the earlier token")
	}
}
