package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/internal/testkit"
)

// tailLogText reads a run's root action's log over the TailLogs RPC, as
// text.
func tailLogText(ctx context.Context, m *manager, run string) (string, error) {
	proxy := dataproxyconnect.NewDataProxyServiceClient(http.DefaultClient, m.URL)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	stream, err := proxy.TailLogs(ctx, connect.NewRequest(&dataproxy.TailLogsRequest{ActionId: &common.ActionIdentifier{
		Run: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: run}, Name: "a0",
	}}))
	if err != nil {
		return "", err
	}
	defer stream.Close()
	var b strings.Builder
	for stream.Receive() {
		for _, l := range stream.Msg().GetLogs() {
			for _, line := range l.GetLines() {
				b.WriteString(line.GetMessage())
			}
		}
	}
	return b.String(), stream.Err()
}

// waitLogShows polls m's TailLogs for run until the log shows printed.
func waitLogShows(t *testing.T, ctx context.Context, m *manager, run, printed, where string) {
	t.Helper()
	if msg := testkit.Poll(time.Minute, 500*time.Millisecond, func() string {
		text, err := tailLogText(ctx, m, run)
		switch {
		case err != nil:
			return "TailLogs: " + err.Error()
		case !strings.Contains(text, printed):
			return "the log lacks " + printed + ":\n" + text
		}
		return ""
	}); msg != "" {
		t.Fatalf("%s: %s", where, msg)
	}
}

// removeRunDirs removes the attempt directories of run from a manager's
// work directory (<home>/work/<org>/<project>/<domain>/<run>).
func removeRunDirs(t *testing.T, m *manager, run string) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(m.Home, "work", "*", testProject, testDomain, run))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no work directory of run %s under %s (%v)", run, m.Home, err)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
}

// Logs outlive their attempt (issue 27): the local executor ships every
// attempt's log to blob storage, so a run's log is read after its attempt
// directory is gone, after a manager restart and, with two managers on one
// PostgreSQL and one storage, from the other manager after the one that ran
// it stopped. Before shipping, TailLogs read the attempt's directory only,
// and answered NotFound in each of these cases.
func TestLogsOutliveTheirAttempt(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := scenarioContext(t, 10*time.Minute)
			dsn := b.dsn(t)
			shared := testkit.TaskDir(t)
			env := []string{
				"FLYTE_MANAGER_STORAGE_URL=file://" + filepath.Join(shared, "blobs"),
				"FLYTE_MANAGER_STORAGE_SIGNINGKEY=e2e-logship-shared-signing-key",
				"FLYTE_MANAGER_EXECUTOR_LOCAL_LEASETTL=5s",
			}
			a := startSDKManager(t, dsn, env...)
			dir := t.TempDir()
			cliConfig(t, ctx, a, dir)
			copyTree(t, filepath.Join("testdata", "cli"), dir)
			run := cliRun(t, ctx, dir, "cli_tasks.py", "double", "--x", "1")
			if phase := waitRun(t, ctx, a, run); phase != "SUCCEEDED" {
				t.Fatalf("run %s is %s", run, phase)
			}
			const printed = "double got x=1"

			removeRunDirs(t, a, run)
			waitLogShows(t, ctx, a, run, printed, "after the attempt directory was removed")
			// Under the run's prefix, whole, its chunks gone.
			logDir := filepath.Join(shared, "blobs", "runs", "*", testProject, testDomain, run, "a0", "1", "_logs")
			testkit.Eventually(t, "the log stored whole under the run's prefix", time.Minute, func() bool {
				final, _ := filepath.Glob(filepath.Join(logDir, "log.pb"))
				parts, _ := filepath.Glob(filepath.Join(logDir, "part-*"))
				return len(final) == 1 && len(parts) == 0
			})
			checkLogs(t, ctx, a, dir, run, printed) // and as flyte get logs shows it
			if m := a.metrics(); !regexp.MustCompile(`(?m)^flyte_manager_executor_log_bytes_shipped_total [1-9]`).MatchString(m) ||
				!strings.Contains(m, "flyte_manager_executor_log_ship_failures_total 0") {
				t.Errorf("metrics do not count the shipped log:\n%s", linesMentioning(m, "log_"))
			}

			if b.name != "postgres" {
				a.Restart()
				waitLogShows(t, ctx, a, run, printed, "after a restart")
				return
			}
			// A second replica, which never ran the attempt and has no
			// directory of it, reads the log once the first has stopped.
			other := startSDKManager(t, dsn, env...)
			a.Stop()
			waitLogShows(t, ctx, other, run, printed, "from the other manager after the one that ran it stopped")
		})
	}
}

// With the kubernetes executor an attempt's log is its Pod's: shipped to
// storage, it is read after the Pod was deleted. Before shipping, TailLogs
// answered NotFound once the Pod was gone.
func TestKubernetesLogOutlivesItsPod(t *testing.T) {
	c, clusterDir := startKubeCluster(t)
	m := startKubeManager(t, c, clusterDir, c.Kubeconfig, kubeSharedFiles)
	ctx := scenarioContext(t, 10*time.Minute)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	copyTree(t, filepath.Join("testdata", "cli"), dir)
	run := cliRun(t, ctx, dir, "cli_tasks.py", "double", "--x", "1")
	if phase := waitRun(t, ctx, m, run); phase != "SUCCEEDED" {
		t.Fatalf("run %s is %s", run, phase)
	}
	const printed = "double got x=1"
	waitLogShows(t, ctx, m, run, printed, "from the Pod")

	// The Pod goes once its log is stored, as garbage collection takes it.
	stored := filepath.Join(m.Home, "blobs", "runs", "*", testProject, testDomain, run, "a0", "1", "_logs", "log.pb")
	testkit.Eventually(t, "the attempt's log stored", 2*time.Minute, func() bool {
		found, _ := filepath.Glob(stored)
		return len(found) == 1
	})
	pods := kubePods.ofRun(run)
	if len(pods) == 0 {
		t.Fatalf("run %s had no Pod", run)
	}
	for _, p := range pods {
		if err := c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the Pod deleted", 2*time.Minute, func() bool {
			_, err := c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	}
	waitLogShows(t, ctx, m, run, printed, "after its Pod was deleted")
	checkLogs(t, ctx, m, dir, run, printed)
}
