package store_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

var run1 = store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r1"}

func newRun(key store.RunKey) store.NewAction {
	spec := []byte("task spec")
	return store.NewAction{
		Key:           key.Action(store.RootName),
		ActionType:    store.ActionTypeTask,
		Task:          store.TaskID{Project: key.Project, Domain: key.Domain, Name: "wf.main", Version: "v1"},
		TaskType:      "python",
		Spec:          spec,
		InputURI:      "file:///tmp/in",
		RunOutputBase: "file:///tmp/out/",
		RunSpec:       []byte("run spec"),
		CreatedBy:     "alice",
	}
}

func child(run store.RunKey, name, parent string) store.NewAction {
	spec := []byte("child spec")
	return store.NewAction{
		Key:        run.Action(name),
		ParentName: parent,
		ActionType: store.ActionTypeTask,
		Task:       store.TaskID{Project: run.Project, Domain: run.Domain, Name: "wf.step", Version: "v1"},
		Spec:       spec,
		InputURI:   "file:///tmp/" + name,
		Group:      "g",
	}
}

func TestCreateRun(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		a, err := s.Actions.CreateRun(ctx, newRun(run1))
		if err != nil {
			t.Fatal(err)
		}
		if !a.IsRoot() || a.Name != store.RootName || a.Phase != phase.Queued || a.Attempts != 1 || a.ResourceVersion == 0 {
			t.Fatalf("created %+v", a)
		}
		got := must[*store.Action](t)(s.Actions.Get(ctx, run1.Action(store.RootName)))
		if !bytes.Equal(got.RunSpec, []byte("run spec")) || got.Task.Name != "wf.main" || got.CreatedBy != "alice" ||
			got.SpecDigest != store.SpecDigest([]byte("task spec")) || got.StartedAt != nil || got.EndedAt != nil {
			t.Fatalf("Get = %+v", got)
		}
		if !got.CreatedAt.Equal(a.CreatedAt) {
			t.Fatalf("created_at round trip: %v != %v", got.CreatedAt, a.CreatedAt)
		}
		spec := must[[]byte](t)(s.Tasks.GetSpec(ctx, got.SpecDigest))
		if string(spec) != "task spec" {
			t.Fatalf("spec = %q", spec)
		}
		attempts := must[[]store.Attempt](t)(s.Actions.Attempts(ctx, a.ActionKey))
		if len(attempts) != 1 || attempts[0].Attempt != 1 || attempts[0].Phase != phase.Queued {
			t.Fatalf("attempts = %+v", attempts)
		}
		changes := must[[]store.Change](t)(s.Actions.ChangesSince(ctx, 0, 10))
		if len(changes) != 1 || changes[0].Op != store.ChangeAdded || changes[0].Key != a.ActionKey ||
			changes[0].ResourceVersion != a.ResourceVersion || changes[0].ObjectResourceVersion != a.ResourceVersion {
			t.Fatalf("changes = %+v", changes)
		}

		_, err = s.Actions.CreateRun(ctx, newRun(run1))
		wantErr(t, err, errs.ErrAlreadyExists)
		if n := len(must[[]store.Change](t)(s.Actions.ChangesSince(ctx, 0, 10))); n != 1 {
			t.Fatalf("duplicate run wrote a change: %d rows", n)
		}
		// Same run name in another domain is another run.
		other := run1
		other.Domain = "staging"
		if _, err := s.Actions.CreateRun(ctx, newRun(other)); err != nil {
			t.Fatal(err)
		}
		bad := newRun(store.RunKey{Project: "p", Domain: "d", RunName: "x"})
		bad.Key.Name = "a1"
		_, err = s.Actions.CreateRun(ctx, bad)
		wantErr(t, err, errs.ErrInvalid)
	})
}

func TestCreateChild(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))

		c1, created, err := s.Actions.CreateChild(ctx, child(run1, "c1", store.RootName))
		if err != nil || !created || c1.ParentName == nil || *c1.ParentName != store.RootName {
			t.Fatalf("CreateChild = %+v, %v, %v", c1, created, err)
		}
		again, created, err := s.Actions.CreateChild(ctx, child(run1, "c1", store.RootName))
		if err != nil || created || again.ID != c1.ID || again.ResourceVersion != c1.ResourceVersion {
			t.Fatalf("identical re-submission = %+v, %v, %v", again, created, err)
		}
		different := child(run1, "c1", store.RootName)
		different.InputURI = "file:///elsewhere"
		_, _, err = s.Actions.CreateChild(ctx, different)
		wantErr(t, err, errs.ErrAlreadyExists)

		_, _, err = s.Actions.CreateChild(ctx, child(run1, "c2", "nope"))
		wantErr(t, err, errs.ErrNotFound)
		_, _, err = s.Actions.CreateChild(ctx, child(store.RunKey{Project: "p", Domain: "d", RunName: "none"}, "c2", store.RootName))
		wantErr(t, err, errs.ErrNotFound)

		// Grandchild, and a trace created already finished (no stored spec).
		must[*store.Action](t)(first(s.Actions.CreateChild(ctx, child(run1, "c1-1", "c1"))))
		started := time.Now().Add(-time.Minute)
		trace := store.NewAction{Key: run1.Action("t1"), ParentName: "c1", ActionType: store.ActionTypeTrace,
			Phase: phase.Succeeded, CreatedAt: started, EndedAt: started.Add(time.Second)}
		tr := must[*store.Action](t)(first(s.Actions.CreateChild(ctx, trace)))
		if tr.SpecDigest != "" || tr.EndedAt == nil || tr.EndedAt.Sub(*tr.StartedAt) != time.Second {
			t.Fatalf("trace = %+v", tr)
		}

		kids := must[[]store.Action](t)(first(s.Actions.ListChildren(ctx, run1.Action("c1"), store.Page{})))
		if len(kids) != 2 || kids[0].Name != "t1" || kids[1].Name != "c1-1" { // t1 started earlier
			t.Fatalf("children of c1 = %v", names(kids))
		}
		all := must[[]store.Action](t)(first(s.Actions.ListActions(ctx, run1, store.ActionFilter{}, store.Page{})))
		if len(all) != 4 {
			t.Fatalf("actions of run = %v", names(all))
		}
		// Filters narrow the run's actions (Action.listall, Run.first_failure).
		for _, tc := range []struct {
			name string
			f    store.ActionFilter
			want []string
		}{
			{"succeeded", store.ActionFilter{Phases: []phase.Phase{phase.Succeeded}}, []string{"t1"}},
			{"queued or failed", store.ActionFilter{Phases: []phase.Phase{phase.Queued, phase.Failed}}, []string{"a0", "c1", "c1-1"}},
			{"traces", store.ActionFilter{Types: []store.ActionType{store.ActionTypeTrace}}, []string{"t1"}},
			{"queued children of c1", store.ActionFilter{Parent: "c1", Phases: []phase.Phase{phase.Queued}}, []string{"c1-1"}},
			{"created after the trace", store.ActionFilter{CreatedAfter: tr.CreatedAt.Add(time.Microsecond)}, []string{"a0", "c1", "c1-1"}},
			{"created before c1", store.ActionFilter{CreatedBefore: c1.CreatedAt}, []string{"a0", "t1"}},
			{"updated in the future", store.ActionFilter{UpdatedAfter: time.Now().Add(time.Hour)}, nil},
		} {
			got := names(must[[]store.Action](t)(first(s.Actions.ListActions(ctx, run1, tc.f, store.Page{}))))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
		roots := must[[]store.Action](t)(first(s.Actions.ListRuns(ctx, store.RunFilter{Project: run1.Project, Domain: run1.Domain}, store.Page{})))
		if len(roots) != 1 || roots[0].Name != store.RootName {
			t.Fatalf("runs = %v", names(roots))
		}
	})
}

func TestUpdatePhases(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		a := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		key := a.ActionKey

		running, err := s.Actions.Update(ctx, key, a.ResourceVersion, store.Update{Phase: phase.Running, Cluster: "local"})
		if err != nil {
			t.Fatal(err)
		}
		if running.Phase != phase.Running || running.StartedAt == nil || running.ResourceVersion <= a.ResourceVersion {
			t.Fatalf("after RUNNING: %+v", running)
		}
		// A writer holding the old version loses.
		_, err = s.Actions.Update(ctx, key, a.ResourceVersion, store.Update{Phase: phase.Failed})
		wantErr(t, err, errs.ErrConflict)

		// Attempt 1 fails and is retried: the action goes back to QUEUED.
		retried, err := s.Actions.Update(ctx, key, running.ResourceVersion, store.Update{
			Phase: phase.Queued, AttemptPhase: phase.Failed, Retry: true, ErrorInfo: []byte("oom"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if retried.Attempts != 2 || retried.Phase != phase.Queued || string(retried.ErrorInfo) != "oom" {
			t.Fatalf("after retry: %+v", retried)
		}
		done, err := s.Actions.Update(ctx, key, retried.ResourceVersion, store.Update{Phase: phase.Succeeded, OutputURI: "file:///out/2"})
		if err != nil {
			t.Fatal(err)
		}
		if done.EndedAt == nil || !done.Phase.Terminal() {
			t.Fatalf("after SUCCEEDED: %+v", done)
		}
		_, err = s.Actions.Update(ctx, key, store.AnyVersion, store.Update{Phase: phase.Running})
		wantErr(t, err, errs.ErrPrecondition)
		_, err = s.Actions.Update(ctx, run1.Action("nope"), store.AnyVersion, store.Update{Phase: phase.Running})
		wantErr(t, err, errs.ErrNotFound)

		attempts := must[[]store.Attempt](t)(s.Actions.Attempts(ctx, key))
		if len(attempts) != 2 ||
			attempts[0].Phase != phase.Failed || attempts[0].EndedAt == nil || string(attempts[0].ErrorInfo) != "oom" || attempts[0].Cluster != "local" ||
			attempts[1].Phase != phase.Succeeded || attempts[1].EndedAt == nil || attempts[1].OutputURI != "file:///out/2" {
			t.Fatalf("attempts = %+v", attempts)
		}
		var got [][2]int
		for _, ev := range must[[]store.Event](t)(s.Actions.Events(ctx, key)) {
			got = append(got, [2]int{int(ev.Attempt), int(ev.Phase)})
		}
		want := [][2]int{{1, 1}, {1, 4}, {1, 6}, {2, 1}, {2, 5}}
		if len(got) != len(want) {
			t.Fatalf("transitions = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("transitions = %v, want %v", got, want)
			}
		}
	})
}

func TestRequestAbortCascades(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		for _, c := range [][2]string{{"c1", store.RootName}, {"c2", store.RootName}, {"c1-1", "c1"}, {"c1-1-1", "c1-1"}} {
			must[*store.Action](t)(first(s.Actions.CreateChild(ctx, child(run1, c[0], c[1]))))
		}
		must[*store.Action](t)(s.Actions.Update(ctx, run1.Action("c2"), store.AnyVersion, store.Update{Phase: phase.Succeeded}))

		marked := must[[]store.Action](t)(s.Actions.RequestAbort(ctx, run1.Action(store.RootName), []byte("user")))
		if len(marked) != 4 { // everything but the finished c2
			t.Fatalf("marked %v", names(marked))
		}
		for _, a := range must[[]store.Action](t)(first(s.Actions.ListActions(ctx, run1, store.ActionFilter{}, store.Page{}))) {
			if (a.AbortRequestedAt != nil) == (a.Name == "c2") {
				t.Fatalf("%s abort requested = %v", a.Name, a.AbortRequestedAt)
			}
		}
		if again := must[[]store.Action](t)(s.Actions.RequestAbort(ctx, run1.Action(store.RootName), []byte("user"))); len(again) != 0 {
			t.Fatalf("second abort marked %v", names(again))
		}
	})
}

func TestListNonTerminal(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		for _, n := range []string{"c1", "c2", "c3", "c4", "c5"} {
			must[*store.Action](t)(first(s.Actions.CreateChild(ctx, child(run1, n, store.RootName))))
		}
		must[*store.Action](t)(s.Actions.Update(ctx, run1.Action("c2"), store.AnyVersion, store.Update{Phase: phase.Failed}))
		must[*store.Action](t)(s.Actions.Update(ctx, run1.Action("c4"), store.AnyVersion, store.Update{Phase: phase.Paused}))
		var got []string
		token := ""
		for {
			rows, next, err := s.Actions.ListNonTerminal(ctx, store.Page{Limit: 2, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, names(rows)...)
			if next == "" {
				break
			}
			token = next
		}
		want := []string{store.RootName, "c1", "c3", "c4", "c5"}
		if len(got) != len(want) {
			t.Fatalf("non-terminal = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("non-terminal = %v, want %v", got, want)
			}
		}
	})
}

func names(as []store.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Name
	}
	return out
}

// first adapts (value, extra, error) calls to must.
func first[A, B any](a A, _ B, err error) (A, error) { return a, err }
