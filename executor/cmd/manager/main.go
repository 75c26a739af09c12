// Command manager is the executor's development binary (`make -C executor
// build` writes it to executor/bin/manager): it reconciles TaskActions in the
// cluster of the current kubeconfig.
//
// The reconciler keeps each run's state in a database and its data in a blob
// store, and the Pods it starts call the manager's Actions and DataProxy
// services (children, uploads). So this binary is the whole manager
// (manager/compose, what `flyte-manager start` runs) with development defaults:
// executor.type kubernetes, a SQLite database and file blobs in --home, and
// the API on --port, where the SDK can reach it as well.
//
//	./bin/manager                              # the current kubeconfig and context
//	./bin/manager --context kind-dev --namespace flyte
//	./bin/manager --shared-storage=false --storage s3://bucket/prefix
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"

	"fmgr.dev/internal/config"
	"fmgr.dev/manager/compose"
)

// version is set at build time like the manager's.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the default handling returns, so a second one
	// ends a shutdown that takes too long.
	context.AfterFunc(ctx, stop)
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// flags are the command line.
type flags struct {
	kubeconfig    string
	context       string
	namespace     string
	home          string
	host          string
	port          int
	endpoint      string
	sharedStorage bool
	storage       string
	leaderElect   bool
	logLevel      string
}

func parse(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig `file` (default $KUBECONFIG, then ~/.kube/config, then in-cluster credentials)")
	fs.StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&f.namespace, "namespace", "", "namespace of the TaskActions and Pods (default: the context's namespace, else default)")
	fs.StringVar(&f.home, "home", filepath.Join("bin", "manager-home"), "`dir` of the SQLite database and, unless --storage, the file blobs")
	fs.StringVar(&f.host, "host", "127.0.0.1", "interface the API and /healthz, /readyz, /metrics listen on")
	fs.IntVar(&f.port, "port", 8090, "port of the API and the probes")
	fs.StringVar(&f.endpoint, "endpoint", "", "host:port at which Pods reach this manager (default: the listening address, right when Pods run on this host)")
	fs.BoolVar(&f.sharedStorage, "shared-storage", true, "Pods see --home at the same path (a single-host cluster, a shared volume); false needs --storage")
	fs.StringVar(&f.storage, "storage", "", "blob store `URL` (s3://bucket/prefix, ...) instead of file blobs in --home")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "accepted for Deployments with several replicas; the executor lease in the database always elects the one replica that reconciles")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return f, nil
}

// run parses the command line, builds the manager's configuration and runs
// the manager until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := f.config()
	if err != nil {
		return err
	}
	log.Info("reconciling TaskActions", "cluster", f.clusterSource(), "context", orCurrent(f.context),
		"namespace", cfg.Executor.Kubernetes.Namespace, "home", cfg.Home, "storage", cfg.Redacted().Storage.URL)
	if cfg.Executor.Kubernetes.SharedFileStorage && strings.HasPrefix(cfg.Storage.URL, "file://") {
		log.Info("shared storage: Pods must see the home directory at the same path (true of the test cluster and of single-host clusters with a hostPath volume); else run with --shared-storage=false --storage s3://...", "home", cfg.Home)
	}
	if f.leaderElect {
		log.Info("leader election: the executor lease in the database elects one reconciler; the other replicas serve the API and stand by")
	}
	return compose.Run(ctx, cfg, compose.Options{Stdout: stdout, Stderr: stderr, Version: version})
}

// config is the manager's configuration for the flags: the defaults of
// internal/config with the development settings on top. Environment
// variables (FLYTE_MANAGER_*) still apply beneath the flags.
func (f *flags) config() (*config.Config, error) {
	if !f.sharedStorage && f.storage == "" {
		return nil, fmt.Errorf("%w: --shared-storage=false needs --storage (an s3:// URL the Pods can reach)", errUsage)
	}
	ns := f.namespace
	if ns == "" {
		var err error
		if ns, err = f.contextNamespace(); err != nil {
			return nil, err
		}
	}
	o := map[string]any{
		"home":                                  f.home,
		"server.host":                           f.host,
		"server.port":                           f.port,
		"log.level":                             f.logLevel,
		"executor.type":                         config.ExecutorKubernetes,
		"executor.kubernetes.kubeconfig":        f.kubeconfig,
		"executor.kubernetes.context":           f.context,
		"executor.kubernetes.namespace":         ns,
		"executor.kubernetes.endpoint":          f.endpoint,
		"executor.kubernetes.sharedFileStorage": f.sharedStorage,
	}
	if f.storage != "" {
		o["storage.url"] = f.storage
	}
	if f.endpoint != "" {
		// Pods send the endpoint as their Host: a name this manager is
		// known by, not a page rebinding its own name (see server.allowedHosts).
		o["server.allowedHosts"] = []string{f.endpoint}
	}
	return config.Load(config.Sources{Overrides: o})
}

// contextNamespace is the namespace kubectl uses with the same kubeconfig
// and context (so `kubectl apply -k config/samples/` lands where this
// manager looks): the context's namespace, the Pod's own in a cluster, else
// "default".
func (f *flags) contextNamespace() (string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).Namespace()
	if err != nil {
		return "", fmt.Errorf("the kubeconfig's namespace: %w", err)
	}
	return ns, nil
}

// clusterSource says where the cluster's address comes from, for the log.
func (f *flags) clusterSource() string {
	switch {
	case f.kubeconfig != "":
		return f.kubeconfig
	case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		return "$" + clientcmd.RecommendedConfigPathEnvVar
	default:
		return clientcmd.RecommendedHomeFile + " or in-cluster"
	}
}

func orCurrent(s string) string {
	if s == "" {
		return "(current)"
	}
	return s
}
