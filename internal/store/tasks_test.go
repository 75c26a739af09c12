package store_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

func TestTaskSpecs(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		spec := []byte("spec bytes \x00\x01\xff")
		d := store.SpecDigest(spec)
		for i := 0; i < 2; i++ { // idempotent
			if err := s.Tasks.PutSpec(ctx, d, spec); err != nil {
				t.Fatalf("PutSpec #%d: %v", i+1, err)
			}
		}
		got := must[[]byte](t)(s.Tasks.GetSpec(ctx, d))
		if !bytes.Equal(got, spec) {
			t.Fatalf("GetSpec = %q", got)
		}
		wantErr(t, s.Tasks.PutSpec(ctx, d, []byte("other")), errs.ErrInvalid)
		_, err := s.Tasks.GetSpec(ctx, store.SpecDigest([]byte("missing")))
		wantErr(t, err, errs.ErrNotFound)
	})
}

func TestDeploy(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		spec1, spec2 := []byte("v1"), []byte("v2")
		id := store.TaskID{Project: "flytesnacks", Domain: "development", Name: "wf.hello", Version: "abc"}
		task := store.Task{TaskID: id, SpecDigest: store.SpecDigest(spec1), ShortName: "hello", EnvironmentName: "env", DeployedBy: "me"}

		first, created, err := s.Tasks.Deploy(ctx, task, spec1)
		if err != nil || !created {
			t.Fatalf("Deploy = %v, %v", created, err)
		}
		again, created, err := s.Tasks.Deploy(ctx, task, spec1)
		if err != nil || created || again.ID != first.ID {
			t.Fatalf("re-Deploy same spec = %+v, %v, %v", again, created, err)
		}
		changed := task
		changed.SpecDigest = store.SpecDigest(spec2)
		_, _, err = s.Tasks.Deploy(ctx, changed, spec2)
		wantErr(t, err, errs.ErrAlreadyExists)
		// The failed deploy rolled back the spec it carried.
		_, err = s.Tasks.GetSpec(ctx, store.SpecDigest(spec2))
		wantErr(t, err, errs.ErrNotFound)

		// A digest that was never stored.
		orphan := task
		orphan.TaskID.Version = "orphan"
		orphan.SpecDigest = store.SpecDigest([]byte("never stored"))
		_, _, err = s.Tasks.Deploy(ctx, orphan, nil)
		wantErr(t, err, errs.ErrPrecondition)

		_, _, err = s.Tasks.Deploy(ctx, store.Task{TaskID: store.TaskID{Name: "x"}, SpecDigest: "d"}, nil)
		wantErr(t, err, errs.ErrInvalid)

		got := must[*store.Task](t)(s.Tasks.Get(ctx, id))
		if got.SpecDigest != task.SpecDigest || got.ShortName != "hello" || got.DeployedBy != "me" {
			t.Fatalf("Get = %+v", got)
		}
		_, err = s.Tasks.Get(ctx, store.TaskID{Project: "flytesnacks", Domain: "development", Name: "nope", Version: "1"})
		wantErr(t, err, errs.ErrNotFound)
	})
}

func TestTaskListAndLatest(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		spec := []byte("spec")
		deploy := func(name, version string) {
			t.Helper()
			id := store.TaskID{Project: "p", Domain: "d", Name: name, Version: version}
			if _, _, err := s.Tasks.Deploy(ctx, store.Task{TaskID: id, SpecDigest: store.SpecDigest(spec)}, spec); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 12; i++ {
			deploy("a", fmt.Sprintf("v%02d", i))
			deploy("b", fmt.Sprintf("v%02d", i))
		}
		latest := must[*store.Task](t)(s.Tasks.Latest(ctx, "", "p", "d", "a"))
		if latest.TaskID.Version != "v11" {
			t.Fatalf("Latest = %s", latest.TaskID.Version)
		}
		_, err := s.Tasks.Latest(ctx, "", "p", "d", "zzz")
		wantErr(t, err, errs.ErrNotFound)

		seen := map[string]int{}
		token, pages := "", 0
		for {
			rows, next, err := s.Tasks.List(ctx, store.TaskFilter{Project: "p", Domain: "d", Name: "a"}, store.Page{Limit: 5, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for i, r := range rows {
				if r.TaskID.Name != "a" {
					t.Fatalf("filter by name returned %s", r.TaskID.Name)
				}
				if i > 0 && r.CreatedAt.After(rows[i-1].CreatedAt) {
					t.Fatal("not newest first")
				}
				seen[r.TaskID.Version]++
			}
			if pages == 1 {
				deploy("a", "v99") // newer than the cursor: not part of this listing
			}
			if next == "" {
				break
			}
			token = next
		}
		for i := 0; i < 12; i++ {
			if n := seen[fmt.Sprintf("v%02d", i)]; n != 1 {
				t.Fatalf("v%02d listed %d times", i, n)
			}
		}
		all, _, err := s.Tasks.List(ctx, store.TaskFilter{Project: "p"}, store.Page{Limit: 100})
		if err != nil || len(all) != 25 {
			t.Fatalf("List project = %d rows, %v", len(all), err)
		}
	})
}
