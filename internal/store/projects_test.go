package store_test

import (
	"context"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

func TestProjects(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		seed := must[*store.Project](t)(s.Projects.Get(ctx, "", "flytesnacks"))
		if seed.State != store.ProjectActive {
			t.Fatalf("seed project state = %d", seed.State)
		}
		domains := must[[]store.Domain](t)(s.Projects.Domains(ctx))
		if len(domains) != 3 || domains[0].ID != "development" || domains[2].Name != "production" {
			t.Fatalf("domains = %+v", domains)
		}

		p := &store.Project{Org: "acme", Name: "ml", Description: "models", Labels: map[string]string{"team": "ml"}}
		if err := s.Projects.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		wantErr(t, s.Projects.Create(ctx, &store.Project{Org: "acme", Name: "ml"}), errs.ErrAlreadyExists)
		// Same name in another org is a different project.
		if err := s.Projects.Create(ctx, &store.Project{Org: "other", Name: "ml"}); err != nil {
			t.Fatal(err)
		}
		got := must[*store.Project](t)(s.Projects.Get(ctx, "acme", "ml"))
		if got.Labels["team"] != "ml" || got.Description != "models" {
			t.Fatalf("got %+v", got)
		}
		_, err := s.Projects.Get(ctx, "acme", "nope")
		wantErr(t, err, errs.ErrNotFound)

		got.Description, got.State = "archived now", store.ProjectArchived
		if err := s.Projects.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		if again := must[*store.Project](t)(s.Projects.Get(ctx, "acme", "ml")); again.State != store.ProjectArchived || again.Description != "archived now" {
			t.Fatalf("after update: %+v", again)
		}
		wantErr(t, s.Projects.Update(ctx, &store.Project{Org: "acme", Name: "nope"}), errs.ErrNotFound)

		p1, created, err := s.Projects.EnsureExists(ctx, "acme", "auto")
		if err != nil || !created || p1.Name != "auto" {
			t.Fatalf("EnsureExists first = %+v, %v, %v", p1, created, err)
		}
		p2, created, err := s.Projects.EnsureExists(ctx, "acme", "auto")
		if err != nil || created || p2.ID != p1.ID {
			t.Fatalf("EnsureExists again = %+v, %v, %v", p2, created, err)
		}
	})
}

func TestProjectsPagination(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		for i := 0; i < 20; i++ {
			must[struct{}](t)(struct{}{}, s.Projects.Create(ctx, &store.Project{Org: "o", Name: fmt.Sprintf("p%02d", i)}))
		}
		seen := map[string]int{}
		token := ""
		for page := 0; ; page++ {
			rows, next, err := s.Projects.List(ctx, store.ProjectFilter{Org: "o"}, store.Page{Limit: 6, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range rows {
				seen[p.Name]++
			}
			// A project that sorts before the cursor appears mid-listing.
			if page == 1 {
				must[struct{}](t)(struct{}{}, s.Projects.Create(ctx, &store.Project{Org: "o", Name: "a-late"}))
			}
			if next == "" {
				break
			}
			token = next
		}
		for i := 0; i < 20; i++ {
			if n := seen[fmt.Sprintf("p%02d", i)]; n != 1 {
				t.Fatalf("p%02d listed %d times", i, n)
			}
		}
		_, _, err := s.Projects.List(ctx, store.ProjectFilter{Org: "o"}, store.Page{Token: "garbage!"})
		wantErr(t, err, errs.ErrInvalid)
	})
}

// The conditions of the admin filter grammar, on both databases.
func TestListProjectsFiltered(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, _ *gorm.DB) {
		ctx := context.Background()
		for _, p := range []store.Project{
			{Name: "alpha", DisplayName: "Alpha Team", Description: "a"},
			{Name: "beta", DisplayName: "beta", Description: "b_%", State: store.ProjectArchived},
			{Name: "gamma", DisplayName: "Gamma", Description: "c", State: store.ProjectSystemGenerated},
		} {
			if err := s.Projects.Create(ctx, &p); err != nil {
				t.Fatal(err)
			}
		}
		names := func(f store.ProjectFilter) string {
			t.Helper()
			rows, _, err := s.Projects.List(ctx, f, store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range rows {
				out = append(out, r.Name)
			}
			return fmt.Sprint(out)
		}
		text := func(col string, op store.TextOp, vs ...string) store.ProjectFilter {
			return store.ProjectFilter{Text: []store.TextCond{{Column: col, Op: op, Values: vs}}}
		}
		for _, c := range []struct {
			f    store.ProjectFilter
			want string
		}{
			{store.ProjectFilter{States: []store.ProjectState{store.ProjectActive}}, "[alpha flytesnacks]"},
			{store.ProjectFilter{States: []store.ProjectState{store.NoProjectState}}, "[]"},
			{text("display_name", store.TextContains, "Team"), "[alpha]"},
			// LIKE's wildcards are ordinary characters.
			{text("description", store.TextContains, "_%"), "[beta]"},
			{text("name", store.TextEq, "gamma"), "[gamma]"},
			{text("name", store.TextNe, "gamma"), "[alpha beta flytesnacks]"},
			{text("name", store.TextGt, "beta"), "[flytesnacks gamma]"},
			{text("name", store.TextGte, "beta"), "[beta flytesnacks gamma]"},
			{text("name", store.TextLt, "beta"), "[alpha]"},
			{text("name", store.TextLte, "beta"), "[alpha beta]"},
			{text("name", store.TextIn, "alpha", "gamma", "zeta"), "[alpha gamma]"},
			{text("name", store.TextNotIn, "alpha", "beta"), "[flytesnacks gamma]"},
		} {
			if got := names(c.f); got != c.want {
				t.Errorf("%+v: %s, want %s", c.f, got, c.want)
			}
		}
		_, _, err := s.Projects.List(ctx, text("labels", store.TextEq, "x"), store.Page{})
		wantErr(t, err, errs.ErrInvalid)
	})
}
