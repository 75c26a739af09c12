package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	"fmgr.dev/gen/go/flyteidl2/secret"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/internal/dbtest"
)

// The secrets page lists each scope's secrets by name, and no value ever
// reaches the page.
func TestConsoleSecrets(t *testing.T) {
	m := startManager(t, dbtest.SQLiteDSN(t))
	client := secretconnect.NewSecretServiceClient(rpcClient, m.URL)
	value := canary(t, "console-secret")
	for _, id := range []*secret.SecretIdentifier{
		{Name: "project-token", Domain: "development", Project: "flytesnacks"},
		{Name: "domain-token", Domain: "development"},
		{Name: "org-token"},
		{Name: "other-token", Domain: "development", Project: "other"},
		{Name: "staging-token", Domain: "staging"},
	} {
		_, err := client.CreateSecret(context.Background(), connect.NewRequest(&secret.CreateSecretRequest{
			Id: id, SecretSpec: &secret.SecretSpec{Value: &secret.SecretSpec_StringValue{StringValue: value}},
		}))
		if err != nil {
			t.Fatalf("creating %s: %v", id.GetName(), err)
		}
	}

	b := newBrowser(t, 0)
	b.open(m.URL + "/v2/projects")
	b.waitText("#projects", "flytesnacks")
	b.run("follow the project's secrets link", chromedp.Click(css(`[data-project="flytesnacks"] a[href$="/development/project/flytesnacks/secrets"]`)))
	for name, scope := range map[string]string{
		"project-token": "project flytesnacks", "domain-token": "every project in development", "org-token": "every project",
	} {
		b.waitText(fmt.Sprintf(`[data-secret=%q] .scope`, name), scope)
	}
	// Secrets of another project or domain are not this project's.
	if n := eval[int](b, `document.querySelectorAll(".secret-scope [data-secret]").length`); n != 3 {
		t.Errorf("the page lists %d secrets, want the 3 that flytesnacks/development can read", n)
	}
	if page := eval[string](b, `document.documentElement.outerHTML`); strings.Contains(page, value) {
		t.Errorf("the secrets page holds a secret's value")
	}
	b.screenshot("secrets")
}
