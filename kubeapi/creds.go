package kubeapi

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"fmgr.dev/internal/tlscert"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// Credentials live in <home>/kubeapi: a self-signed certificate and its
// key (kubectl sends a token only over https), and the SHA-256 of every
// bearer token handed out, one a line. Tokens themselves are never
// stored: `flyte-manager kubeconfig` mints one each time it runs and
// prints it in the kubeconfig; `--rotate` revokes every earlier one.
const (
	CertFile   = tlscert.CertFile
	KeyFile    = tlscert.KeyFile
	TokensFile = "tokens"
)

// EnsureCertificate returns the certificate in dir, generating a
// self-signed one (valid for loopback and hosts, ten years) when there is
// none yet.
func EnsureCertificate(dir string, hosts ...string) (tls.Certificate, []byte, error) {
	return tlscert.Ensure(dir, "flyte-manager kube API", hosts...)
}

// writePrivate writes data to path (mode 0600) through a temporary file,
// so a reader never sees half of it.
func writePrivate(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// MintToken creates a bearer token, records its hash in dir (after
// revoking every earlier token when rotate is set) and returns it.
func MintToken(dir string, rotate bool) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	path := filepath.Join(dir, TokensFile)
	var old []byte
	if !rotate {
		var err error
		if old, err = os.ReadFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	if err := writePrivate(path, append(old, hex.EncodeToString(sum[:])+"\n"...)); err != nil {
		return "", err
	}
	return token, nil
}

// Tokens checks bearer tokens against the hashes in a tokens file, read
// again whenever it changes (a kubeconfig minted or tokens rotated while
// the manager runs take effect at once).
type Tokens struct {
	path string

	mu     sync.Mutex
	stamp  time.Time
	size   int64
	hashes [][]byte
}

// NewTokens checks tokens against the tokens file in dir.
func NewTokens(dir string) *Tokens { return &Tokens{path: filepath.Join(dir, TokensFile)} }

// Valid reports whether token is one of the file's.
func (t *Tokens) Valid(token string) bool {
	if token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reload()
	ok := false
	for _, h := range t.hashes {
		if subtle.ConstantTimeCompare(h, sum[:]) == 1 {
			ok = true
		}
	}
	return ok
}

func (t *Tokens) reload() {
	info, err := os.Stat(t.path)
	if err != nil {
		t.hashes, t.stamp, t.size = nil, time.Time{}, 0
		return
	}
	if info.ModTime().Equal(t.stamp) && info.Size() == t.size && t.hashes != nil {
		return
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return
	}
	var hashes [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if h, err := hex.DecodeString(strings.TrimSpace(sc.Text())); err == nil && len(h) == sha256.Size {
			hashes = append(hashes, h)
		}
	}
	t.hashes, t.stamp, t.size = hashes, info.ModTime(), info.Size()
}

// ContextName is the kubeconfig context (and cluster and user) name.
const ContextName = "flyte-manager"

// Kubeconfig is a kubeconfig for server, trusting caPEM, authenticating
// with token, in namespace by default, under ContextName.
func Kubeconfig(server string, caPEM []byte, token, namespace string) ([]byte, error) {
	return NamedKubeconfig(ContextName, server, caPEM, token, namespace)
}

// NamedKubeconfig is Kubeconfig with its context, cluster and user called
// name (the sandbox's is flyte-devbox, the name the SDK's devbox switches to).
func NamedKubeconfig(name, server string, caPEM []byte, token, namespace string) ([]byte, error) {
	cfg := clientcmdv1.Config{
		Kind: "Config", APIVersion: "v1", CurrentContext: name,
		Clusters: []clientcmdv1.NamedCluster{{Name: name, Cluster: clientcmdv1.Cluster{
			Server: server, CertificateAuthorityData: caPEM}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: name, AuthInfo: clientcmdv1.AuthInfo{Token: token}}},
		Contexts: []clientcmdv1.NamedContext{{Name: name, Context: clientcmdv1.Context{
			Cluster: name, AuthInfo: name, Namespace: namespace}}},
	}
	return yaml.Marshal(cfg)
}
