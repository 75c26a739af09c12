package kubeapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
	"fmgr.dev/kubeapi"
)

type keys map[string]authn.Principal

func (k keys) Verify(_ context.Context, tok string) (authn.Principal, error) {
	if p, ok := k[tok]; ok {
		return p, nil
	}
	return authn.Principal{}, authn.ErrBadCredential
}

// Besides its kubeconfig tokens the API takes the API keys' bearer tokens,
// scoped by their roles: a viewer of one project lists and gets only its
// actions and cannot delete them; a contributor may; a task's credential
// and an unknown token are refused.
func TestAPIKeysAreScoped(t *testing.T) {
	g := dbtest.Migrated(t, dbtest.SQLiteDSN(t))
	state, _, e := statetest.New(t, g, statetest.Options{}, runstate.NoExecutor)
	dir := t.TempDir()
	if _, err := kubeapi.MintToken(dir, false); err != nil {
		t.Fatal(err)
	}
	bind := func(role, project string) []authn.Binding {
		return []authn.Binding{{Role: role, Project: project, Domain: "*"}}
	}
	api := kubeapi.New(kubeapi.Deps{Actions: e.Store.Actions, Hub: e.Hub, Aborter: state,
		Placement: v1.Placement{Namespace: "flyte"}, Tokens: kubeapi.NewTokens(dir), Version: "test", BookmarkEvery: 50 * time.Millisecond,
		Keys: keys{
			"viewer":      {Subject: "apikey:v", Kind: authn.KindAPIKey, Bindings: bind("viewer", "flytesnacks")},
			"contributor": {Subject: "apikey:c", Kind: authn.KindAPIKey, Bindings: bind("contributor", "flytesnacks")},
			"task":        {Subject: "task:x", Kind: authn.KindTask, Run: authn.RunScope{Project: "flytesnacks", Domain: "development", Run: "r1"}},
		}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	for _, k := range []store.ActionKey{run1.Action("a0"), store.RunKey{Project: "other", Domain: "development", RunName: "r9"}.Action("a0")} {
		n := store.NewAction{Key: k, ActionType: store.ActionTypeTask, TaskType: "python", Spec: []byte("spec"),
			Task: store.TaskID{Project: k.Project, Domain: k.Domain, Name: "wf.main", Version: "v1"}}
		if _, err := e.Store.Actions.CreateRun(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	do := func(token, method, path string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const own, others = base + "/flytesnacks-development-r1-a0", base + "/other-development-r9-a0"

	if code, body := do("viewer", "GET", base); code != 200 || !strings.Contains(body, "r1") || strings.Contains(body, "r9") {
		t.Errorf("viewer lists: %d %s", code, body)
	}
	if code, _ := do("viewer", "GET", own); code != 200 {
		t.Errorf("viewer gets its project's action: %d", code)
	}
	if code, _ := do("viewer", "GET", others); code != 404 {
		t.Errorf("viewer gets another project's action: %d, want 404", code)
	}
	if code, _ := do("viewer", "DELETE", own); code != 403 {
		t.Errorf("viewer deletes: %d, want 403", code)
	}
	if code, _ := do("contributor", "DELETE", others); code != 404 {
		t.Errorf("contributor deletes another project's action: %d, want 404", code)
	}
	if code, _ := do("contributor", "DELETE", own); code != 200 {
		t.Errorf("contributor deletes its project's action: %d", code)
	}
	for _, tok := range []string{"task", "nope"} {
		if code, _ := do(tok, "GET", base); code != 401 {
			t.Errorf("%s lists: %d, want 401", tok, code)
		}
	}
}
