package e2e

import (
	"testing"

	"fmgr.dev/internal/s3test"
)

// s3Scenarios are the sdkScenarios run again with the manager's storage on
// S3: the smoke test (the quick start, values, a fan-out whose parent
// writes its children's inputs to the store itself), files and dirs, the
// cache and secrets.
var s3Scenarios = []string{"values", "tree", "quickstart", "files", "cache", "secrets"}

// startSDKManagerOnS3 starts an SDK manager whose blobs are on a fresh S3
// server, under a prefix (so every key is proven to honour it).
func startSDKManagerOnS3(t *testing.T, dsn string, env ...string) *manager {
	t.Helper()
	srv := s3test.Start(t)
	m := startSDKManager(t, dsn, append(srv.ManagerEnv("fm"), env...)...)
	m.S3 = srv
	return m
}

// TestSDKOnS3 runs the SDK scenarios with the local executor on S3 storage,
// on each database: the manager's signed URLs and uploads (code bundles),
// and task processes reading and writing the store with the credentials
// the manager gave them. The S3 server refuses any request without its
// access key, so a task that did not get them fails.
func TestSDKOnS3(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			m := startSDKManagerOnS3(t, b.dsn(t))
			for _, name := range s3Scenarios {
				run := scenarioNamed(t, name)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					run(t, m)
				})
			}
			t.Cleanup(func() {
				if n := m.S3.Denied(); n > 0 {
					t.Errorf("the S3 server refused %d requests for their credentials", n)
				}
			})
		})
	}
}

// scenarioNamed is the sdkScenario called name.
func scenarioNamed(t *testing.T, name string) func(*testing.T, *manager) {
	for _, s := range sdkScenarios {
		if s.name == name {
			return s.run
		}
	}
	t.Fatalf("no SDK scenario %q", name)
	return nil
}
