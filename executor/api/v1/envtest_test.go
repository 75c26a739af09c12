package v1_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "fmgr.dev/executor/api/v1"
)

// The suites below run against a real kube-apiserver and etcd (envtest) with
// the generated CRD installed. They need KUBEBUILDER_ASSETS (a directory
// holding kube-apiserver, etcd and, optionally, kubectl: `make
// envtest-assets`); without it they skip, except in CI, where they fail.

// testCluster is a running API server with a client and a kubeconfig file
// for kubectl and make.
type testCluster struct {
	env        *envtest.Environment
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
}

var (
	cluster    *testCluster // shared by the suites; has the CRD installed
	clusterErr error
	kubectlBin string // "" when neither the assets nor PATH hold a kubectl
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
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		clusterErr = errNoAssets
		return m.Run()
	}
	if p := filepath.Join(assets, "kubectl"); isExecutable(p) {
		kubectlBin = p
	} else if p, err := exec.LookPath("kubectl"); err == nil {
		kubectlBin = p
	}
	cluster, clusterErr = startCluster(crdDir)
	if clusterErr == nil {
		defer cluster.stop()
	}
	return m.Run()
}

var errNoAssets = fmt.Errorf("KUBEBUILDER_ASSETS is not set (make envtest-assets builds them)")

// startCluster starts kube-apiserver and etcd from KUBEBUILDER_ASSETS with the
// CRDs of crdDirs installed.
func startCluster(crdDirs ...string) (*testCluster, error) {
	tc := &testCluster{env: &envtest.Environment{CRDDirectoryPaths: crdDirs, ErrorIfCRDPathMissing: true}}
	cfg, err := tc.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the API server: %w", err)
	}
	if err := tc.connect(cfg); err != nil {
		tc.stop()
		return nil, err
	}
	return tc, nil
}

func (tc *testCluster) connect(cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	tc.cfg, tc.client = cfg, c
	admin, err := tc.env.AddUser(envtest.User{Name: "test-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "taskaction-kubeconfig-*")
	if err != nil {
		return err
	}
	defer f.Close()
	tc.kubeconfig = f.Name()
	_, err = f.Write(kc)
	return err
}

func (tc *testCluster) stop() {
	if tc.kubeconfig != "" {
		_ = os.Remove(tc.kubeconfig)
	}
	_ = tc.env.Stop()
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// needCluster skips the test without envtest assets (fails in CI) and
// returns a fresh namespace for it.
func needCluster(t *testing.T) string {
	t.Helper()
	switch {
	case clusterErr == errNoAssets && os.Getenv("CI") != "true":
		t.Skip(clusterErr)
	case clusterErr != nil:
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
	ns := needCluster(t)
	if kubectlBin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no kubectl in KUBEBUILDER_ASSETS or on PATH")
		}
		t.Skip("no kubectl in KUBEBUILDER_ASSETS or on PATH")
	}
	return ns
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
