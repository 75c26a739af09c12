package testcluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ForTest starts a cluster for t (with opts[0] when given) and stops it when
// t ends. Without opts, Dir is a temporary directory of t. Without the
// binaries the test fails or is skipped (see the package comment).
func ForTest(t testing.TB, opts ...Options) *Cluster {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("testcluster.ForTest takes at most one Options, got %d", len(opts))
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	if o.AssetsDir == "" {
		o.AssetsDir = RequireAssets(t)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*startTimeout)
	defer cancel()
	c, err := Start(ctx, o)
	if err != nil {
		logTail(t, o.Dir)
		t.Fatalf("starting the test cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the test cluster: %v", err)
		}
		if t.Failed() {
			logTail(t, o.Dir)
		}
	})
	return c
}

// logTail shows the end of the cluster's logs in a failed test.
func logTail(t testing.TB, dir string) {
	for _, name := range []string{"testcluster.log", "kube-apiserver.log", "etcd.log"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				b = b[i+1:]
			}
		}
		t.Logf("end of %s:\n%s", name, b)
	}
}

// Patience is how long tests wait for the cluster to act on something
// (testkit.Eventually's bound): generous, the machine may be loaded.
const Patience = 2 * time.Minute
