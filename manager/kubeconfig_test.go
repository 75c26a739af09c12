package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"fmgr.dev/kubeapi"
)

// `flyte-manager kubeconfig` prints a kubeconfig for kubeAPI.listen with a
// fresh token each time; --rotate revokes the earlier ones; --server names
// another address.
func TestKubeconfigCommand(t *testing.T) {
	home := isolate(t)
	ctx := context.Background()
	kubeconfig := func(args ...string) (server, namespace, token string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if c := run(ctx, append([]string{"kubeconfig", "--home", home}, args...), &stdout, &stderr); c != 0 {
			t.Fatalf("kubeconfig %v: exit %d: %s", args, c, stderr.String())
		}
		cfg, err := clientcmd.Load(stdout.Bytes())
		if err != nil {
			t.Fatalf("%v:\n%s", err, stdout.String())
		}
		c := cfg.Contexts[cfg.CurrentContext]
		if cfg.CurrentContext != "flyte-manager" || c == nil || len(cfg.Clusters[c.Cluster].CertificateAuthorityData) == 0 {
			t.Fatalf("kubeconfig:\n%s", stdout.String())
		}
		return cfg.Clusters[c.Cluster].Server, c.Namespace, cfg.AuthInfos[c.AuthInfo].Token
	}
	server, ns, t1 := kubeconfig()
	if server != "https://127.0.0.1:8091" || ns != "flyte" || t1 == "" {
		t.Errorf("server %q namespace %q token %q", server, ns, t1)
	}
	server, _, t2 := kubeconfig("--server", "https://manager.example:9443")
	if server != "https://manager.example:9443" || t2 == t1 {
		t.Errorf("--server: %q, token %q after %q", server, t2, t1)
	}
	tokens := kubeapi.NewTokens(filepath.Join(home, "kubeapi"))
	if !tokens.Valid(t1) || !tokens.Valid(t2) {
		t.Error("minted tokens are not valid")
	}
	_, _, t3 := kubeconfig("--rotate")
	if tokens.Valid(t1) || tokens.Valid(t2) || !tokens.Valid(t3) {
		t.Error("--rotate did not revoke the earlier tokens")
	}
}
