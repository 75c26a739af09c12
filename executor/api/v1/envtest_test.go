package v1_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/testcluster"
)

// The suites below run against a real kube-apiserver and etcd (package
// testcluster, the binaries `make envtest-assets` builds into bin/k8s, or
// $KUBEBUILDER_ASSETS) with the generated CRD installed. Without the
// binaries they skip, or fail where testcluster says they must (CI, or
// assets configured but incomplete).

// testCluster is a running test cluster with a client for these types.
type testCluster struct {
	*testcluster.Cluster
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
}

var (
	cluster    *testCluster // shared by the suites; has the CRD installed
	clusterErr error
	kubectlBin = testcluster.Kubectl()
	nsCounter  atomic.Int64
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// crdDir holds the generated CRD.
var crdDir = filepath.Join("..", "..", "config", "crd", "bases")

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Started only when the binaries are there; needCluster decides, test
	// by test, whether their absence skips or fails.
	if _, err := os.Stat(kubectlBin); err == nil {
		cluster, clusterErr = startCluster(crdDir)
		if clusterErr == nil {
			defer cluster.stop()
		}
	} else {
		clusterErr = err
	}
	return m.Run()
}

// startCluster starts a test cluster with the CRDs of crdDir installed and
// no namespaces of its own.
func startCluster(crdDir string) (*testCluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.Options{CRDDirs: []string{crdDir}, Namespaces: []string{}})
	if err != nil {
		return nil, err
	}
	k, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return &testCluster{Cluster: c, cfg: c.Config, client: k, kubeconfig: c.Kubeconfig}, nil
}

func (tc *testCluster) stop() { _ = tc.Stop() }

// needCluster skips the test without envtest assets (fails in CI) and
// returns a fresh namespace for it.
func needCluster(t *testing.T) string {
	t.Helper()
	testcluster.RequireAssets(t)
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	ns := fmt.Sprintf("%s-%d", "ta", nsCounter.Add(1))
	if err := cluster.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	return ns
}

// needKubectl is needCluster for tests that run the real kubectl.
func needKubectl(t *testing.T) string {
	t.Helper()
	return needCluster(t) // the assets include kubectl
}

// kubectl runs the real kubectl against the test API server.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", cluster.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
