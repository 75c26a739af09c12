package e2e

import (
	"context"
	"strings"
	"testing"

	"fmgr.dev/internal/dbtest"
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
			t.Cleanup(func() { checkS3Secret(t, m) })
		})
	}
}

// TestSDKKubernetesOnS3 runs the scenarios with the kubernetes executor on
// S3 storage: Pods, and the copilot of raw container Pods, reach the store
// with the credentials their Pod refers to.
func TestSDKKubernetesOnS3(t *testing.T) {
	srv := s3test.Start(t)
	c, clusterDir := startKubeCluster(t)
	m := startKubeManager(t, c, clusterDir, c.Kubeconfig, srv.ManagerEnv("fm")...)
	m.S3 = srv
	for _, name := range []string{"values", "files", "cache", "containers"} {
		run := scenarioNamed(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, m)
		})
	}
	t.Cleanup(func() { checkS3Secret(t, m) })
}

// checkS3Secret, once m's scenarios ended: every request reached the S3
// server with the manager's access key, and its secret key is nowhere it
// must not be (the home, the database, Pod specs, the manager's output).
func checkS3Secret(t *testing.T, m *manager) {
	if n := m.S3.Denied(); n > 0 {
		t.Errorf("the S3 server refused %d requests for their credentials", n)
	}
	checkNoValueStored(t, context.Background(), m, []string{s3test.SecretAccessKey})
	if strings.Contains(m.output.String(), s3test.SecretAccessKey) {
		t.Error("the manager printed the S3 secret key")
	}
}

// TestSDKPresignedOnS3 runs the scenarios that upload (code bundles, the
// quick start's) and download (files) with storage.s3.presignedURLs: the
// SDK then PUTs straight to the S3 server with the URL and headers the
// manager presigned.
func TestSDKPresignedOnS3(t *testing.T) {
	m := startSDKManagerOnS3(t, dbtest.SQLiteDSN(t), "FLYTE_MANAGER_STORAGE_S3_PRESIGNED_URLS=true")
	for _, name := range []string{"quickstart", "values", "files"} {
		run := scenarioNamed(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, m)
		})
	}
	t.Cleanup(func() {
		checkS3Secret(t, m)
		if m.S3.Presigned() == 0 {
			t.Error("no request reached the S3 server through a presigned URL")
		}
	})
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
