package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

func TestAdmitWork(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, _ *gorm.DB) {
		ctx := context.Background()
		// An unknown domain is refused before the project is looked at, so
		// even with autoCreate nothing is created.
		_, _, err := s.Projects.AdmitWork(ctx, "", "fresh", "run_id.domain", "qa", true)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `run_id.domain "qa"`) ||
			!strings.Contains(err.Error(), "development, staging, production") {
			t.Fatalf("unknown domain: %v", err)
		}
		if _, err := s.Projects.Get(ctx, "", "fresh"); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("a refused domain created the project: %v", err)
		}

		_, _, err = s.Projects.AdmitWork(ctx, "", "fresh", "d", "development", false)
		if !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "projects.autoCreate") {
			t.Fatalf("unknown project without autoCreate: %v", err)
		}
		p, created, err := s.Projects.AdmitWork(ctx, "", "fresh", "d", "development", true)
		if err != nil || !created || p.Name != "fresh" {
			t.Fatalf("autoCreate: %+v, %v, %v", p, created, err)
		}
		if _, created, err = s.Projects.AdmitWork(ctx, "", "fresh", "d", "staging", true); err != nil || created {
			t.Fatalf("existing project: created=%v, %v", created, err)
		}

		for _, state := range []store.ProjectState{store.ProjectArchived, store.ProjectSystemArchived} {
			p.State = state
			if err := s.Projects.Update(ctx, p); err != nil {
				t.Fatal(err)
			}
			for _, autoCreate := range []bool{true, false} {
				_, _, err := s.Projects.AdmitWork(ctx, "", "fresh", "d", "development", autoCreate)
				if !errors.Is(err, errs.ErrPrecondition) || !strings.Contains(err.Error(), `project "fresh" is archived`) {
					t.Fatalf("state %d, autoCreate %v: %v, want ErrPrecondition naming the project", state, autoCreate, err)
				}
			}
		}
		p.State = store.ProjectSystemGenerated
		if err := s.Projects.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Projects.AdmitWork(ctx, "", "fresh", "d", "development", false); err != nil {
			t.Fatalf("system-generated project: %v", err)
		}
	})
}
