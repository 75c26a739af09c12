package e2e

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSDKLostCodeBundle: the SDK's client cache names code bundles for a
// day without uploading them again; a manager whose storage lost them (its
// data directory was wiped) refuses, with FailedPrecondition naming the
// bundle and the cache, a run from a spec, a run of a deployed task and a
// deploy, and creates no run; after `flyte delete local-cache`, as the
// refusal says, the same three work again. On each database.
func TestSDKLostCodeBundle(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			m := startSDKManager(t, b.dsn(t))
			ctx := scenarioContext(t, 8*time.Minute)
			// One HOME for every step: the SDK keeps its cache there.
			home := []string{"HOME=" + t.TempDir()}
			type submitted struct{ Run, Phase, Bundle string }
			var first struct{ Inline, Deployed submitted }
			driverWith(t, ctx, home, &first, "drive_bundle.py", sdkEndpoint(m), "first")
			for name, s := range map[string]submitted{"inline": first.Inline, "deployed": first.Deployed} {
				if s.Phase != "SUCCEEDED" || !strings.HasPrefix(m.blobPath(s.Bundle), m.Home+"/") {
					t.Fatalf("%s run %s: %s with bundle %q, want SUCCEEDED with a bundle in the manager's storage under %s", name, s.Run, s.Phase, s.Bundle, m.Home)
				}
			}
			// The data directory loses the bundles (the runs' rows stay, as
			// they do on PostgreSQL).
			for _, bundle := range []string{first.Inline.Bundle, first.Deployed.Bundle} {
				if err := os.Remove(m.blobPath(bundle)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
			}

			type refusal struct {
				Error struct {
					Code  string
					Chain []string
				}
			}
			var refused struct {
				Inline, Deploy, Deployed refusal
				RunsBefore               int `json:"runs_before"`
				RunsAfter                int `json:"runs_after"`
			}
			driverWith(t, ctx, home, &refused, "drive_bundle.py", sdkEndpoint(m), "refused")
			for name, r := range map[string]refusal{"run from a spec": refused.Inline, "deploy": refused.Deploy, "run of the deployed task": refused.Deployed} {
				said := strings.Join(r.Error.Chain, "\n")
				if r.Error.Code != "FAILED_PRECONDITION" {
					t.Errorf("%s: the client saw code %q, want FAILED_PRECONDITION:\n%s", name, r.Error.Code, said)
				}
				for _, want := range []string{"does not exist in this manager's storage", ".flyte/local-cache/cache.db", "flyte delete local-cache"} {
					if !strings.Contains(said, want) {
						t.Errorf("%s: the client's error does not say %q:\n%s", name, want, said)
					}
				}
				if !strings.Contains(said, first.Inline.Bundle) && !strings.Contains(said, first.Deployed.Bundle) {
					t.Errorf("%s: the client's error does not name the missing bundle (%s):\n%s", name, first.Inline.Bundle, said)
				}
			}
			if refused.RunsAfter != refused.RunsBefore {
				t.Errorf("refused runs were created: %d runs before, %d after", refused.RunsBefore, refused.RunsAfter)
			}

			var purged struct{ Inline, Deployed submitted }
			driverWith(t, ctx, home, &purged, "drive_bundle.py", sdkEndpoint(m), "purged")
			if purged.Inline.Phase != "SUCCEEDED" || purged.Deployed.Phase != "SUCCEEDED" {
				t.Errorf("after `flyte delete local-cache`: run from a spec %s, run of the deployed task %s; want both SUCCEEDED",
					purged.Inline.Phase, purged.Deployed.Phase)
			}
		})
	}
}
