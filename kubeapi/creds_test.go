package kubeapi_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"fmgr.dev/kubeapi"
)

// Each kubeconfig gets its own token; only hashes are stored (0600);
// rotating revokes every earlier token; the certificate is made once.
func TestCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kubeapi")
	tokens := kubeapi.NewTokens(dir)
	if tokens.Valid("anything") {
		t.Fatal("a token is valid before any was minted")
	}
	t1, err := kubeapi.MintToken(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t2, _ := kubeapi.MintToken(dir, false)
	if !tokens.Valid(t1) || !tokens.Valid(t2) || tokens.Valid(t1+"x") || tokens.Valid("") {
		t.Fatal("minted tokens are not (the only ones) valid")
	}
	data, _ := os.ReadFile(filepath.Join(dir, kubeapi.TokensFile))
	if strings.Contains(string(data), t1) {
		t.Fatal("the tokens file holds a token in the clear")
	}
	t3, _ := kubeapi.MintToken(dir, true)
	if tokens.Valid(t1) || tokens.Valid(t2) || !tokens.Valid(t3) {
		t.Fatal("rotation did not revoke the earlier tokens")
	}

	_, pem1, err := kubeapi.EnsureCertificate(dir, "example.test")
	if err != nil {
		t.Fatal(err)
	}
	_, pem2, _ := kubeapi.EnsureCertificate(dir)
	if !bytes.Equal(pem1, pem2) {
		t.Fatal("the certificate was generated again")
	}
	for _, f := range []string{kubeapi.TokensFile, kubeapi.KeyFile, kubeapi.CertFile} {
		if info, err := os.Stat(filepath.Join(dir, f)); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, info.Mode(), err)
		}
	}

	out, err := kubeapi.Kubeconfig("https://127.0.0.1:8091", pem1, t3, "flyte")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if cfg.CurrentContext != "flyte-manager" || ctx.Namespace != "flyte" || cfg.AuthInfos[ctx.AuthInfo].Token != t3 ||
		cfg.Clusters[ctx.Cluster].Server != "https://127.0.0.1:8091" {
		t.Fatalf("kubeconfig:\n%s", out)
	}
}
