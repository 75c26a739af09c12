package kubeapi_test

import (
	"context"
	"strings"
	"testing"

	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// A run the retention collector deleted (store.Retention.DeleteRun) is gone
// from the Kubernetes-style view: GET is 404, lists leave it out, and a
// watch open across the deletion carries on with the next change.
func TestCollectedRunIsGone(t *testing.T) {
	e := newEnv(t)
	run2 := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r2"}
	e.create(run1.Action("a0"), "")
	e.create(run1.Action("c1"), "a0")
	for _, n := range []string{"c1", "a0"} {
		e.set(run1.Action(n), store.Update{Phase: phase.Succeeded})
	}
	events, stop := e.watch("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
	defer stop()
	for typ, _ := next(t, events, false); typ != "BOOKMARK"; typ, _ = next(t, events, false) {
	}

	if _, err := e.st.Retention.DeleteRun(context.Background(), run1); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a0", "c1"} {
		if resp, b := e.do("GET", base+"/flytesnacks-development-r1-"+n, ""); resp.StatusCode != 404 {
			t.Errorf("GET %s after the run was collected: %d %s", n, resp.StatusCode, b)
		}
	}
	if resp, b := e.do("GET", base, ""); resp.StatusCode != 200 || strings.Contains(string(b), "flytesnacks-development-r1") {
		t.Errorf("list after the run was collected: %d %s", resp.StatusCode, b)
	}

	e.create(run2.Action("a0"), "")
	if typ, obj := next(t, events, true); typ != "ADDED" || meta(obj)["name"] != "flytesnacks-development-r2-a0" {
		t.Fatalf("the watch after the deletion: %s %v", typ, obj)
	}
	// A watch from now on, and a fresh streaming list, start cleanly.
	fresh, stop2 := e.watch("sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
	defer stop2()
	if typ, obj := next(t, fresh, true); typ != "ADDED" || meta(obj)["name"] != "flytesnacks-development-r2-a0" {
		t.Fatalf("a new watch: %s %v", typ, obj)
	}
}
