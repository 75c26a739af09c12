package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
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
func TestAuthSDKWithAPIKeyOverTLS(t *testing.T) {
	venv(t)
	if ln, err := net.Listen("tcp", "127.0.0.1:443"); err != nil {
		t.Skipf("port 443 is not available (the SDK takes an API key's endpoint as https://<host>:443): %v", err)
	} else {
		ln.Close()
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			m := startManagerWith(t, mgrproc.Options{Bin: managerBin, DSN: b.dsn(t), Port: 443, Env: []string{
				"FLYTE_MANAGER_SERVER_TLS_ENABLED=true", "FLYTE_MANAGER_AUTH_MODE=required",
			}})
			if !strings.HasPrefix(m.URL, "https://") {
				t.Fatalf("banner URL %s, want https", m.URL)
			}
			apikey := func(args ...string) string {
				t.Helper()
				cmd := exec.CommandContext(ctx, managerBin, append([]string{"apikey", "--home", m.Home, "--db", m.DSN}, args...)...)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("apikey %v: %v", args, err)
				}
				return strings.TrimSpace(string(out))
			}
			key := apikey("create", "--name", "ci", "--role", "admin", "--endpoint", "localhost")
			list := apikey("list")
			keyID := strings.Fields(strings.Split(list, "\n")[1])[0]

			dir := t.TempDir()
			withKey := func(args ...string) (string, error) {
				cmd := venvCommand(t, ctx, dir, "flyte", args...)
				cmd.Env = append(cmd.Env, "FLYTE_API_KEY="+key, "SSL_CERT_FILE="+filepath.Join(m.Home, "tls", "tls.crt"))
				out, err := cmd.CombinedOutput()
				return ansiEscape.ReplaceAllString(string(out), ""), err
			}
			out, err := withKey("whoami")
			if err != nil || !strings.Contains(out, "apikey:"+keyID) {
				t.Fatalf("flyte whoami: %v\n%s", err, out)
			}
			out, err = withKey("get", "project")
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

			apikey("revoke", keyID)
			if out, err := withKey("get", "project"); err == nil || strings.Contains(out, "PROJECT_STATE_ACTIVE") {
				t.Errorf("a revoked key still lists projects:\n%s", out)
			}
		})
	}
}
