package cache_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	pb "fmgr.dev/gen/go/flyteidl2/cacheservice"
	v2 "fmgr.dev/gen/go/flyteidl2/cacheservice/v2"
	"fmgr.dev/internal/config"
)

// A client's Put must point into the writer's own storage, at an attempt's
// output directory: an entry whose outputs lie in another project's,
// another domain's or another org's storage (also below the writer's
// prefix, as a run_base_dir can put them), elsewhere in the writer's, or
// outside the manager's storage, is refused with
// InvalidArgument and stores nothing, since a hit would copy those outputs
// into the writer's runs (issue #21, cross-project cache poisoning).
func TestPutOutputLocation(t *testing.T) {
	each(t, config.Default().Cache, func(t *testing.T, h *harness) {
		ctx := context.Background()
		for what, uri := range map[string]string{
			"another project":      h.blobs.URI("runs/o/q/development/r/a0/1"),
			"another domain":       h.blobs.URI("runs/o/p/production/r/a0/1"),
			"another org":          h.blobs.URI("runs/other/p/development/r/a0/1"),
			"a lookalike domain":   h.blobs.URI("runs/o/p/development2/r/a0/1"),
			"the project's inputs": h.blobs.URI("offloaded-inputs/o/p/development/abc"),
			"the runs root":        h.blobs.URI("runs/o/p/development"),
			"a run's base":         h.blobs.URI("runs/o/p/development/r"),
			"a file, not a dir":    h.blobs.URI("runs/o/p/development/r/a0/1/outputs.pb"),
			// Another project's run whose run_base_dir lies below p's prefix.
			"a nested run base": h.blobs.URI("runs/o/p/development/x/o/q/development/r/a0/1"),
			"outside storage":   "file:///etc/passwd",
			"another bucket":    "s3://elsewhere/runs/o/p/development/r/a0/1",
		} {
			wantCode(t, what, h.put(ctx, "p", "k-"+what, uri, nil), connect.CodeInvalidArgument, "output.output_uri")
			_, err := h.get(ctx, "p", "k-"+what)
			wantCode(t, what+": a refused put stored nothing", err, connect.CodeNotFound, "k-")
		}
		// Project q refused project p's outputs, and p's own put is fine.
		wantCode(t, "q names p's outputs", h.put(ctx, "q", "k", h.out("p", "r"), nil), connect.CodeInvalidArgument, `project "q"`)
		if err := h.put(ctx, "p", "k", h.out("p", "r"), nil); err != nil {
			t.Fatalf("a put of the project's own outputs: %v", err)
		}
		// An overwrite is checked as well: it cannot redirect an entry.
		wantCode(t, "overwrite elsewhere", h.put(ctx, "p", "k", h.out("q", "r"), &pb.OverwriteOutput{Overwrite: true}),
			connect.CodeInvalidArgument, "output.output_uri")
		if got, err := h.get(ctx, "p", "k"); err != nil || got.GetOutput().GetOutputUri() != h.out("p", "r") {
			t.Fatalf("after a refused overwrite: %v %v, want the entry unchanged", got, err)
		}

		// v1's empty scope, which no run reads: its outputs must still lie
		// in the manager's storage.
		_, err := h.v1.Put(ctx, connect.NewRequest(&pb.PutCacheRequest{Key: "k1",
			Output: &pb.CachedOutput{Output: &pb.CachedOutput_OutputUri{OutputUri: "file:///etc/passwd"}}}))
		wantCode(t, "v1 outside storage", err, connect.CodeInvalidArgument, "outside the manager's storage")
		_, err = h.v2.Get(ctx, connect.NewRequest(&v2.GetCacheRequest{Identifier: id("p"), BaseRequest: &pb.GetCacheRequest{Key: "k1"}}))
		wantCode(t, "v1 refused put", err, connect.CodeNotFound, "k1")
	})
}
