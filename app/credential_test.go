package app

import (
	"context"
	"testing"

	"gorm.io/gorm"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/dbtest"
)

// An app's credential lives while Running says so: an app that exists and
// is not stopped; stopping or deleting it ends it, on both databases.
func TestRunningGatesAppCredentials(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		s := NewStore(g)
		k := Key{Project: "p", Domain: "development", Name: "web"}
		if ok, err := s.Running(ctx, k); ok || err != nil {
			t.Fatalf("an app that does not exist: %v, %v", ok, err)
		}
		if _, err := s.Create(ctx, k, &pb.App{Metadata: &pb.Meta{}, Spec: &pb.Spec{}, Status: &pb.Status{}}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Running(ctx, k); !ok || err != nil {
			t.Fatalf("a deployed app: %v, %v", ok, err)
		}
		if _, _, err := s.Change(ctx, k, func(r *row) error {
			spec := &pb.Spec{DesiredState: pb.Spec_DESIRED_STATE_STOPPED}
			return r.fill(&pb.App{Metadata: &pb.Meta{}, Spec: spec, Status: &pb.Status{}})
		}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Running(ctx, k); ok || err != nil {
			t.Fatalf("a stopped app: %v, %v", ok, err)
		}
		if _, err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Running(ctx, k); ok || err != nil {
			t.Fatalf("a deleted app: %v, %v", ok, err)
		}
	})
}
