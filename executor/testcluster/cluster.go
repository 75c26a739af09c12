// Package testcluster runs a small Kubernetes cluster on this host for tests
// and for `make test-cluster`: a real etcd and kube-apiserver (envtest, the
// binaries built by `make envtest-assets`), one Node whose Pods run as local
// processes (package nodeagent, which also binds every unscheduled Pod to
// it), and, since envtest runs no controller manager, a garbage collector
// for owner references (gc.go) and a small deployment controller
// (deployments.go).
//
// The binaries are found in $KUBEBUILDER_ASSETS, else bin/k8s of the
// repository. ForTest starts a cluster for one test; when the binaries are
// missing it fails under CI (or when they are configured) and skips
// otherwise, naming `make envtest-assets`.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"fmgr.dev/executor/testcluster/nodeagent"
	"fmgr.dev/internal/sdktest"
)

// Defaults for Options' zero values.
var (
	// DefaultNamespaces are created at start: the manager's namespace in
	// bin/test-cluster/manager.yaml.
	DefaultNamespaces = []string{"flyte"}
	// DefaultGCResources are the dependents the collector looks after:
	// Pods (owned by TaskActions) and TaskActions (owned by TaskActions).
	DefaultGCResources = []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"},
		{Group: "flyte.org", Version: "v1", Resource: "taskactions"},
	}
)

// DefaultCRDDir is where the repository keeps the TaskAction CRD, relative
// to its root; installed when it exists and Options.CRDDirs is empty.
const DefaultCRDDir = "executor/config/crd/bases"

// startTimeout bounds the start of etcd and of the API server each: generous,
// the machine may be loaded.
const startTimeout = 3 * time.Minute

// Options configure a cluster; every field has a default.
type Options struct {
	// Dir holds etcd's data, the API server's certificates, the kubeconfig,
	// the logs and the Pods' working directories. A new temporary
	// directory (removed by Stop) when empty.
	Dir string
	// AssetsDir holds kube-apiserver, etcd and kubectl; AssetsDir() when empty.
	AssetsDir string
	// CRDDirs are directories of CRD manifests to install; when empty, the
	// repository's DefaultCRDDir if it exists.
	CRDDirs []string
	// NodeName is the node of the agent; nodeagent.DefaultNodeName when empty.
	NodeName string
	// Namespaces are created at start; DefaultNamespaces when nil.
	Namespaces []string
	// Runner is the node agent's runner: nodeagent.RunProcess (default) or
	// nodeagent.RunNoop.
	Runner string
	// Env is the environment Pod processes start from (see
	// nodeagent.Options.Env).
	Env []string
	// NoCgroups makes the node agent run processes without cgroups (see
	// nodeagent.Options.NoCgroups).
	NoCgroups bool
	// MaxRunning bounds the Pod processes the node agent runs at once (see
	// nodeagent.Options.MaxRunning); 0 means no bound.
	MaxRunning int
	// GCResources are the resources whose objects are deleted when their
	// owners are gone; DefaultGCResources when nil. Resources the API server
	// does not serve are skipped.
	GCResources []schema.GroupVersionResource
	// Log receives the cluster's records; by default they go to
	// <Dir>/testcluster.log.
	Log *slog.Logger
}

// Cluster is a running test cluster.
type Cluster struct {
	// Config is an administrator's client configuration.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file for Config (<Dir>/kubeconfig).
	Kubeconfig string
	// Dir is Options.Dir.
	Dir string
	// Client is a typed client for Config.
	Client kubernetes.Interface
	// Agent is the node agent.
	Agent *nodeagent.Agent

	env      *envtest.Environment
	cancel   context.CancelFunc
	done     sync.WaitGroup
	agentErr chan error
	closers  []io.Closer
	tempDir  bool
	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd, the API server, the garbage collector and the node
// agent, installs the CRDs and creates the namespaces. It returns once the
// node is ready for Pods; on error nothing keeps running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	c := &Cluster{agentErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if opts.Dir == "" {
		if opts.Dir, err = os.MkdirTemp("", "testcluster-"); err != nil {
			return nil, err
		}
		c.tempDir = true
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	c.Dir = opts.Dir
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		f, err := os.OpenFile(filepath.Join(opts.Dir, "testcluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		c.closers = append(c.closers, f)
		opts.Log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.AssetsDir == "" {
		opts.AssetsDir = AssetsDir()
	}
	if problem := checkAssets(opts.AssetsDir); problem != "" {
		return nil, fmt.Errorf("testcluster: %s: run `%s` (or set %s)", problem, BuildCommand, EnvAssets)
	}
	crdDirs, missingOK := opts.CRDDirs, false
	if len(crdDirs) == 0 {
		crdDirs, missingOK = []string{filepath.Join(sdktest.RepoRoot(), DefaultCRDDir)}, true
	}
	if opts.Namespaces == nil {
		opts.Namespaces = DefaultNamespaces
	}
	if opts.GCResources == nil {
		opts.GCResources = DefaultGCResources
	}

	if err := c.startControlPlane(opts, crdDirs, missingOK); err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	for _, ns := range opts.Namespaces {
		_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("testcluster: namespace %s: %w", ns, err)
		}
	}

	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	gc, err := newCollector(c.Config, opts.GCResources, opts.Log.With("component", "gc"))
	if err != nil {
		return nil, fmt.Errorf("testcluster: garbage collector: %w", err)
	}
	synced := make(chan struct{})
	c.done.Add(1)
	go func() { defer c.done.Done(); gc.run(runCtx, synced) }()
	deps := newDeployments(c.Client, opts.Log.With("component", "deployments"))
	depsSynced := make(chan struct{})
	c.done.Add(1)
	go func() { defer c.done.Done(); deps.run(runCtx, depsSynced) }()

	c.Agent, err = nodeagent.New(nodeagent.Options{
		Client:     c.Client,
		NodeName:   opts.NodeName,
		Dir:        filepath.Join(opts.Dir, "pods"),
		Runner:     opts.Runner,
		Env:        opts.Env,
		NoCgroups:  opts.NoCgroups,
		MaxRunning: opts.MaxRunning,
		Log:        opts.Log.With("component", "nodeagent"),
	})
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		c.agentErr <- c.Agent.Run(runCtx, func() { close(ready) })
	}()
	for _, wait := range []chan struct{}{synced, depsSynced, ready} {
		select {
		case <-wait:
		case err := <-c.agentErr:
			return nil, fmt.Errorf("testcluster: node agent: %w", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	opts.Log.Info("test cluster ready", "host", c.Config.Host, "kubeconfig", c.Kubeconfig, "node", c.Agent.NodeName())
	return c, nil
}

func (c *Cluster) startControlPlane(opts Options, crdDirs []string, missingOK bool) error {
	etcdLog, err := os.Create(filepath.Join(opts.Dir, "etcd.log"))
	if err != nil {
		return err
	}
	apiLog, err := os.Create(filepath.Join(opts.Dir, "kube-apiserver.log"))
	if err != nil {
		etcdLog.Close()
		return err
	}
	c.closers = append(c.closers, etcdLog, apiLog)
	for _, d := range []string{"etcd", "apiserver"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o700); err != nil {
			return err
		}
	}
	apiServer := &envtest.APIServer{Path: filepath.Join(opts.AssetsDir, "kube-apiserver"), CertDir: filepath.Join(opts.Dir, "apiserver"), Out: apiLog, Err: apiLog}
	// The node's host name resolves nowhere: the API server reaches the
	// node agent's kubelet API (Pod logs) at its InternalIP.
	apiServer.Configure().Set("kubelet-preferred-address-types", "InternalIP")
	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd:        &envtest.Etcd{Path: filepath.Join(opts.AssetsDir, "etcd"), DataDir: filepath.Join(opts.Dir, "etcd"), Out: etcdLog, Err: etcdLog},
			APIServer:   apiServer,
			KubectlPath: filepath.Join(opts.AssetsDir, "kubectl"),
		},
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    !missingOK,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if missingOK {
		if _, err := os.Stat(crdDirs[0]); err != nil {
			c.env.CRDDirectoryPaths = nil
		}
	}
	cfg, err := c.env.Start()
	if err != nil {
		return fmt.Errorf("testcluster: starting etcd and the API server (logs in %s): %w", opts.Dir, err)
	}
	c.Config = cfg
	c.Kubeconfig = filepath.Join(opts.Dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, c.env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("testcluster: writing the kubeconfig: %w", err)
	}
	return nil
}

// Stop stops the node agent (and every Pod process), the collector, the
// API server and etcd. Later calls return the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.cancel != nil {
			c.cancel()
		}
		c.done.Wait()
		select {
		case err := <-c.agentErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("node agent: %w", err))
			}
		default:
		}
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("control plane: %w", err))
			}
		}
		for _, cl := range c.closers {
			_ = cl.Close()
		}
		if c.tempDir {
			_ = os.RemoveAll(c.Dir)
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
