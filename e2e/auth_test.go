package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/internal/mgrproc"
)

// The real SDK over TLS with a FLYTE_API_KEY minted by the manager, on
// both databases: the certificate the manager generated is trusted through
// the environment only (SSL_CERT_FILE), the key's endpoint is a bare host
// (so the manager listens on 443), `flyte whoami` answers the key, a call
// without a credential is UNAUTHENTICATED, and a revoked key stops at once.
// authManager is a manager on port 443 with TLS and auth.mode required,
// and the way to run its `apikey` command.
type authManager struct {
	*manager
	t   *testing.T
	ctx context.Context
}

// startAuthManager starts one on b, or skips when port 443 is taken (the
// SDK takes an API key's endpoint as https://<host>:443).
func startAuthManager(t *testing.T, ctx context.Context, b backend, env ...string) authManager {
	t.Helper()
	if ln, err := net.Listen("tcp", "127.0.0.1:443"); err != nil {
		t.Skipf("port 443 is not available (the SDK takes an API key's endpoint as https://<host>:443): %v", err)
	} else {
		ln.Close()
	}
	m := startManagerWith(t, mgrproc.Options{Bin: managerBin, DSN: b.dsn(t), Port: 443, Env: append([]string{
		"FLYTE_MANAGER_SERVER_TLS_ENABLED=true", "FLYTE_MANAGER_AUTH_MODE=required",
	}, env...)})
	if !strings.HasPrefix(m.URL, "https://") {
		t.Fatalf("banner URL %s, want https", m.URL)
	}
	return authManager{manager: m, t: t, ctx: ctx}
}

// apikey runs `flyte-manager apikey args...` on the manager's home and
// database and returns its output.
func (m authManager) apikey(args ...string) string {
	m.t.Helper()
	cmd := exec.CommandContext(m.ctx, managerBin, append([]string{"apikey", "--home", m.Home, "--db", m.DSN}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		m.t.Fatalf("apikey %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// newKey creates a key for localhost and returns it and its id.
func (m authManager) newKey(args ...string) (key, id string) {
	m.t.Helper()
	name := fmt.Sprintf("k%d", time.Now().UnixNano())
	key = m.apikey(append([]string{"create", "--name", name, "--endpoint", "localhost"}, args...)...)
	for _, line := range strings.Split(m.apikey("list"), "\n") {
		if f := strings.Fields(line); len(f) > 1 && slices.Contains(f, name) {
			return key, f[0]
		}
	}
	m.t.Fatalf("key %s is not listed", name)
	return "", ""
}

// keyEnv is what an SDK client needs to use key with the manager: the
// key, and trust in the manager's generated certificate.
func (m authManager) keyEnv(key string) []string {
	return []string{"FLYTE_API_KEY=" + key, "SSL_CERT_FILE=" + filepath.Join(m.Home, "tls", "tls.crt")}
}

// flyte runs the flyte CLI with key.
func (m authManager) flyte(key string, args ...string) (string, error) {
	cmd := venvCommand(m.t, m.ctx, m.t.TempDir(), "flyte", args...)
	cmd.Env = append(cmd.Env, m.keyEnv(key)...)
	out, err := cmd.CombinedOutput()
	return ansiEscape.ReplaceAllString(string(out), ""), err
}

// The real SDK over TLS with a FLYTE_API_KEY minted by the manager, on
// both databases: the certificate the manager generated is trusted through
// the environment only (SSL_CERT_FILE), the key's endpoint is a bare host
// (so the manager listens on 443), `flyte whoami` answers the key, a call
// without a credential is UNAUTHENTICATED, and a revoked key stops at once.
func TestAuthSDKWithAPIKeyOverTLS(t *testing.T) {
	venv(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			m := startAuthManager(t, ctx, b)
			key, keyID := m.newKey("--role", "admin")
			out, err := m.flyte(key, "whoami")
			if err != nil || !strings.Contains(out, "apikey:"+keyID) {
				t.Fatalf("flyte whoami: %v\n%s", err, out)
			}
			out, err = m.flyte(key, "get", "project")
			if err != nil || !strings.Contains(out, testProject) {
				t.Fatalf("flyte get project: %v\n%s", err, out)
			}

			// No credential: UNAUTHENTICATED (what makes the SDK fetch one).
			insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test
			_, err = projectconnect.NewProjectServiceClient(insecure, m.URL).
				ListProjects(ctx, connect.NewRequest(&project.ListProjectsRequest{}))
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("ListProjects without a credential: %v, want UNAUTHENTICATED", err)
			}

			m.apikey("revoke", keyID)
			if out, err := m.flyte(key, "get", "project"); err == nil || strings.Contains(out, "PROJECT_STATE_ACTIVE") {
				t.Errorf("a revoked key still lists projects:\n%s", out)
			}
		})
	}
}
