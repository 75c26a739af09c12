package kubeapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/runstate/statetest"
	"fmgr.dev/internal/store"
	"fmgr.dev/kubeapi"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

var run1 = store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r1"}

type env struct {
	t     *testing.T
	st    *store.Store
	srv   *httptest.Server
	token string
}

func newEnv(t *testing.T) *env {
	g := dbtest.Migrated(t, dbtest.SQLiteDSN(t))
	state, _, e := statetest.New(t, g, statetest.Options{}, runstate.NoExecutor)
	dir := t.TempDir()
	token, err := kubeapi.MintToken(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	api := kubeapi.New(kubeapi.Deps{Actions: e.Store.Actions, Hub: e.Hub, Aborter: state,
		Placement: v1.Placement{Namespace: "flyte"}, Tokens: kubeapi.NewTokens(dir), Version: "test", BookmarkEvery: 50 * time.Millisecond})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &env{t: t, st: e.Store, srv: srv, token: token}
}

func (e *env) create(key store.ActionKey, parent string) *store.Action {
	e.t.Helper()
	n := store.NewAction{Key: key, ActionType: store.ActionTypeTask, TaskType: "python", Spec: []byte("spec"),
		Task: store.TaskID{Project: key.Project, Domain: key.Domain, Name: "wf.main", Version: "v1"}}
	var a *store.Action
	var err error
	if parent == "" {
		a, err = e.st.Actions.CreateRun(context.Background(), n)
	} else {
		n.ParentName = parent
		a, _, err = e.st.Actions.CreateChild(context.Background(), n)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) set(key store.ActionKey, u store.Update) {
	e.t.Helper()
	a, err := e.st.Actions.Get(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.Actions.Update(context.Background(), key, a.ResourceVersion, u); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) do(method, path, accept string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

const base = "/apis/flyte.org/v1/namespaces/flyte/taskactions"

func TestDiscoveryAndErrors(t *testing.T) {
	e := newEnv(t)
	resp, b := e.do("GET", "/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "as=APIGroupDiscoveryList") || !strings.Contains(string(b), `"resource":"taskactions"`) {
		t.Errorf("aggregated discovery: %s %s", ct, b)
	}
	if _, b := e.do("GET", "/apis", "application/json"); !strings.Contains(string(b), `"kind":"APIGroupList"`) {
		t.Errorf("legacy discovery: %s", b)
	}
	if _, b := e.do("GET", "/apis/flyte.org/v1", ""); !strings.Contains(string(b), `"namespaced":true`) {
		t.Errorf("resource list: %s", b)
	}
	if _, b := e.do("GET", "/version", ""); !strings.Contains(string(b), `"gitVersion"`) {
		t.Errorf("version: %s", b)
	}
	for _, c := range []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
	}{
		{"GET", "/api/v1/pods", 404, metav1.StatusReasonNotFound},
		{"GET", base + "/nonesuch-a0", 404, metav1.StatusReasonNotFound},
		{"POST", base, 405, metav1.StatusReasonMethodNotAllowed},
		{"PUT", base + "/x", 405, metav1.StatusReasonMethodNotAllowed},
		{"DELETE", base, 403, metav1.StatusReasonForbidden},
		{"GET", base + "?fieldSelector=spec.runName%3Dr1", 400, metav1.StatusReasonBadRequest},
	} {
		resp, b := e.do(c.method, c.path, "")
		st := decode[metav1.Status](t, b)
		if resp.StatusCode != c.code || st.Code != int32(c.code) || st.Reason != c.reason || st.Kind != "Status" {
			t.Errorf("%s %s = %d %+v, want %d %s", c.method, c.path, resp.StatusCode, st, c.code, c.reason)
		}
	}
	e.token = "wrong"
	if resp, b := e.do("GET", base, ""); resp.StatusCode != 401 || !strings.Contains(string(b), `"reason":"Unauthorized"`) {
		t.Errorf("wrong token: %d %s", resp.StatusCode, b)
	}
	e.token = ""
	if resp, _ := e.do("GET", "/version", ""); resp.StatusCode != 401 {
		t.Errorf("no token: %d", resp.StatusCode)
	}
}

func TestListGetTableAndPaging(t *testing.T) {
	e := newEnv(t)
	e.create(run1.Action("a0"), "")
	for _, n := range []string{"c1", "c2", "c3"} {
		e.create(run1.Action(n), "a0")
	}
	other := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r2"}
	e.create(other.Action("a0"), "")
	e.set(run1.Action("c1"), store.Update{Phase: phase.Running})

	_, b := e.do("GET", base+"?limit=500", tableAccept)
	tbl := decode[metav1.Table](t, b)
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if got := strings.Join(cols, ","); got != "Name,Run,Action,TaskType,Status,Age,Progressing,Succeeded,Failed" {
		t.Errorf("columns %s", got)
	}
	if len(tbl.Rows) != 5 || tbl.ResourceVersion == "" {
		t.Fatalf("table: %s", b)
	}
	if c := tbl.Rows[1].Cells; c[0] != "flytesnacks-development-r1-c1" || c[4] != "Executing" || c[6] != "True" {
		t.Errorf("row of c1: %v", c)
	}

	// -l flyte.org/run=r1, paged by 2.
	var names []string
	cont := ""
	for pages := 0; pages < 5; pages++ {
		_, b := e.do("GET", base+"?labelSelector=flyte.org%2Frun%3Dr1&limit=2&continue="+cont, "")
		list := decode[v1.TaskActionList](t, b)
		for _, it := range list.Items {
			names = append(names, it.Spec.ActionName)
			if it.Kind != "TaskAction" && list.Kind != "TaskActionList" {
				t.Errorf("kinds %s %s", list.Kind, it.Kind)
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	if got := strings.Join(names, ","); got != "a0,c1,c2,c3" {
		t.Errorf("paged run r1: %s", got)
	}
	// A field selector by name, and a namespace nothing lives in.
	_, b = e.do("GET", "/apis/flyte.org/v1/taskactions?fieldSelector=metadata.name%3Dflytesnacks-development-r2-a0", "")
	if l := decode[v1.TaskActionList](t, b); len(l.Items) != 1 || l.Items[0].Spec.RunName != "r2" {
		t.Errorf("field selector: %s", b)
	}
	_, b = e.do("GET", "/apis/flyte.org/v1/namespaces/other/taskactions", "")
	if l := decode[v1.TaskActionList](t, b); len(l.Items) != 0 {
		t.Errorf("namespace other: %s", b)
	}

	// Get one, with its history and owner; describe's events.
	e.set(run1.Action("c1"), store.Update{Phase: phase.Succeeded})
	_, b = e.do("GET", base+"/flytesnacks-development-r1-c1", "")
	ta := decode[v1.TaskAction](t, b)
	var hist []string
	for _, h := range ta.Status.PhaseHistory {
		hist = append(hist, h.Phase)
	}
	if got := strings.Join(hist, ","); got != "QUEUED,RUNNING,SUCCEEDED" || !ta.IsTerminal() ||
		len(ta.OwnerReferences) != 1 || ta.OwnerReferences[0].Name != "flytesnacks-development-r1-a0" || ta.Labels[v1.LabelRun] != "r1" {
		t.Errorf("get c1: history %s, %s", got, b)
	}
	// Names are found whatever they are made of: a project with '-', a
	// name Kubernetes would refuse (hashed).
	for _, key := range []store.ActionKey{
		{RunKey: store.RunKey{Project: "my-proj", Domain: "development", RunName: "r-3"}, Name: "a0"},
		{RunKey: store.RunKey{Project: "My_Proj", Domain: "development", RunName: "R4"}, Name: "a0"},
	} {
		e.create(key, "")
		name := v1.Placement{Namespace: "flyte"}.NameOf(v1.ActionRef{Project: key.Project, Domain: key.Domain, Run: key.RunName, Action: key.Name})
		if resp, b := e.do("GET", base+"/"+name, ""); resp.StatusCode != 200 || decode[v1.TaskAction](t, b).Spec.RunName != key.RunName {
			t.Errorf("get %s: %d %s", name, resp.StatusCode, b)
		}
	}
	_, b = e.do("GET", "/api/v1/namespaces/flyte/events?fieldSelector=involvedObject.name%3Dflytesnacks-development-r1-c1", "")
	if !strings.Contains(string(b), `"reason":"Succeeded"`) {
		t.Errorf("events: %s", b)
	}
}

// watchLines opens a watch and returns its events as they arrive.
func (e *env) watch(query string) (<-chan metav1.WatchEvent, func()) {
	return e.watchAs("", query)
}

func (e *env) watchAs(accept, query string) (<-chan metav1.WatchEvent, func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+base+"?watch=true&"+query, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make(chan metav1.WatchEvent, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev metav1.WatchEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				out <- ev
			}
		}
	}()
	return out, cancel
}

func next(t *testing.T, c <-chan metav1.WatchEvent, skipBookmarks bool) (string, map[string]any) {
	t.Helper()
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatal("watch ended")
			}
			if skipBookmarks && ev.Type == "BOOKMARK" {
				continue
			}
			var obj map[string]any
			_ = json.Unmarshal(ev.Object.Raw, &obj)
			return ev.Type, obj
		case <-time.After(20 * time.Second):
			t.Fatal("no watch event")
		}
	}
}

func meta(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	return m
}

func TestWatch(t *testing.T) {
	e := newEnv(t)
	e.create(run1.Action("a0"), "")

	// The streaming list: ADDED for what exists, the end bookmark, then changes.
	events, stop := e.watch("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
	defer stop()
	if typ, obj := next(t, events, false); typ != "ADDED" || meta(obj)["name"] != "flytesnacks-development-r1-a0" {
		t.Fatalf("first event %s %v", typ, obj)
	}
	typ, obj := next(t, events, false)
	if ann, _ := meta(obj)["annotations"].(map[string]any); typ != "BOOKMARK" || ann[kubeapi.InitialEventsEnd] != "true" {
		t.Fatalf("second event %s %v", typ, obj)
	}
	listRV := meta(obj)["resourceVersion"].(string)
	e.set(run1.Action("a0"), store.Update{Phase: phase.Running})
	if typ, obj := next(t, events, true); typ != "MODIFIED" || meta(obj)["resourceVersion"] == listRV {
		t.Fatalf("change: %s %v", typ, obj)
	}

	// From a version: the changes after it, replayed from the log.
	e.create(run1.Action("c1"), "a0")
	replay, stop2 := e.watch("resourceVersion=" + listRV)
	defer stop2()
	if typ, obj := next(t, replay, true); typ != "MODIFIED" || meta(obj)["name"] != "flytesnacks-development-r1-a0" {
		t.Fatalf("replay 1: %s %v", typ, obj)
	}
	if typ, obj := next(t, replay, true); typ != "ADDED" || meta(obj)["name"] != "flytesnacks-development-r1-c1" {
		t.Fatalf("replay 2: %s %v", typ, obj)
	}

	// Delete aborts; once the abort is recorded the object is gone.
	if resp, b := e.do("DELETE", base+"/flytesnacks-development-r1-a0", ""); resp.StatusCode != 200 || !strings.Contains(string(b), "deletionTimestamp") {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	for _, n := range []string{"a0", "c1"} {
		e.set(run1.Action(n), store.Update{Phase: phase.Aborted})
	}
	for typ, obj := next(t, events, true); ; typ, obj = next(t, events, true) {
		if typ == "DELETED" && meta(obj)["name"] == "flytesnacks-development-r1-c1" {
			break
		}
	}
	if resp, _ := e.do("GET", base+"/flytesnacks-development-r1-a0", ""); resp.StatusCode != 404 {
		t.Errorf("get after the abort: %d", resp.StatusCode)
	}

	// A compacted version: 410 Expired.
	if _, err := e.st.Actions.CompactChanges(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	expired, stop3 := e.watch("resourceVersion=1")
	defer stop3()
	typ, obj = next(t, expired, false)
	if typ != "ERROR" || obj["code"] != float64(410) || obj["reason"] != "Expired" {
		t.Fatalf("compacted: %s %v", typ, obj)
	}
}

// A watch from a version replays the log, whose changes come with each
// object's newest row. A change of an object that changed again later
// sends nothing: sent at its own version with the later state, it would
// show c1 succeeded before a0 started. The later change sends the object,
// as ADDED when the change skipped was its ADDED.
func TestWatchReplayKeepsTheOrderOfChanges(t *testing.T) {
	e := newEnv(t)
	e.create(run1.Action("a0"), "")
	from, err := e.st.Actions.CurrentVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e.create(run1.Action("c1"), "a0")
	e.set(run1.Action("c1"), store.Update{Phase: phase.Running})
	e.set(run1.Action("a0"), store.Update{Phase: phase.Running})
	e.set(run1.Action("c1"), store.Update{Phase: phase.Succeeded})

	// The replay is written before the first bookmark.
	events, stop := e.watch(fmt.Sprintf("resourceVersion=%d&allowWatchBookmarks=true", from))
	defer stop()
	var got []string
	for typ, obj := next(t, events, false); typ != "BOOKMARK"; typ, obj = next(t, events, false) {
		got = append(got, fmt.Sprintf("%s %s@%v", typ, meta(obj)["name"], meta(obj)["resourceVersion"]))
	}
	want := []string{
		fmt.Sprintf("MODIFIED flytesnacks-development-r1-a0@%d", from+3),
		fmt.Sprintf("ADDED flytesnacks-development-r1-c1@%d", from+4),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("replay %q, want %q", got, want)
	}
}

// kubectl get NAME -w: a watch from version 0 by name starts with the
// object itself (kubectl drops that first event), as one-row Tables, the
// first carrying the columns.
func TestWatchOneAsTable(t *testing.T) {
	e := newEnv(t)
	e.create(run1.Action("a0"), "")
	e.create(run1.Action("c1"), "a0")
	events, stop := e.watchAs(tableAccept, "fieldSelector=metadata.name%3Dflytesnacks-development-r1-c1&resourceVersion=0")
	defer stop()
	typ, obj := next(t, events, true)
	if typ != "ADDED" || obj["kind"] != "Table" || obj["columnDefinitions"] == nil {
		t.Fatalf("first event %s %v", typ, obj)
	}
	e.set(run1.Action("a0"), store.Update{Phase: phase.Running}) // not watched
	e.set(run1.Action("c1"), store.Update{Phase: phase.Running})
	typ, obj = next(t, events, true)
	rows, _ := obj["rows"].([]any)
	if typ != "MODIFIED" || len(rows) != 1 || obj["columnDefinitions"] != nil {
		t.Fatalf("change: %s %v", typ, obj)
	}
	if cells := rows[0].(map[string]any)["cells"].([]any); cells[0] != "flytesnacks-development-r1-c1" || cells[4] != "Executing" {
		t.Errorf("cells %v", cells)
	}
}
