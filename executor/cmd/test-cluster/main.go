// Command test-cluster runs the test cluster (package testcluster: etcd,
// kube-apiserver and a node agent that runs Pods as local processes) in the
// background for a manager in kubernetes mode and for kubectl.
//
//	test-cluster start --dir bin/test-cluster   # returns once the cluster is ready
//	test-cluster stop --dir bin/test-cluster    # stops it and removes the directory
//	test-cluster run --dir bin/test-cluster     # the same cluster in the foreground
//
// `make test-cluster` and `make test-cluster-stop` call start and stop.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/executor/testcluster/nodeagent"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "start":
		err = start(args)
	case "run":
		err = run(args)
	case "stop":
		err = stop(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-cluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: test-cluster start|run|stop --dir DIR [--assets DIR] [--runner process|noop] [--crd-dir DIR]... [--namespace NS]")
	os.Exit(2)
}

// options are the flags every command takes.
type options struct {
	dir       string
	assets    string
	runner    string
	namespace string
	crdDirs   multi
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func parse(name string, args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.StringVar(&o.dir, "dir", "bin/test-cluster", "the cluster's directory: data, logs, kubeconfig, manager.yaml")
	fs.StringVar(&o.assets, "assets", "", "directory with kube-apiserver, etcd and kubectl (default $KUBEBUILDER_ASSETS, else bin/k8s)")
	fs.StringVar(&o.runner, "runner", nodeagent.RunProcess, "how the node agent runs Pods: process or noop")
	fs.StringVar(&o.namespace, "namespace", "flyte", "the namespace to create and to name in manager.yaml")
	fs.Var(&o.crdDirs, "crd-dir", "a directory of CRDs to install (repeatable; default "+testcluster.DefaultCRDDir+" when it exists)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	dir, err := filepath.Abs(o.dir)
	o.dir = dir
	return o, err
}

func (o options) path(name string) string { return filepath.Join(o.dir, name) }

// run serves the cluster in the foreground until SIGINT or SIGTERM.
func run(args []string) error {
	o, err := parse("run", args)
	if err != nil {
		return err
	}
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.path(pidFile), fmt.Appendf(nil, "%d\n", os.Getpid()), 0o644); err != nil {
		return err
	}
	defer os.Remove(o.path(pidFile))
	sayTaskRuntime(ctx, o)
	c, err := testcluster.Start(ctx, testcluster.Options{
		Dir:        o.dir,
		AssetsDir:  o.assets,
		CRDDirs:    o.crdDirs,
		Runner:     o.runner,
		Namespaces: []string{o.namespace},
	})
	if err != nil {
		return err
	}
	defer os.Remove(o.path(readyFile))
	if err := os.WriteFile(o.path(managerConfig), managerYAML(c.Kubeconfig, o.namespace), 0o644); err != nil {
		_ = c.Stop()
		return err
	}
	if err := os.WriteFile(o.path(readyFile), []byte(c.Config.Host+"\n"), 0o644); err != nil {
		_ = c.Stop()
		return err
	}
	fmt.Printf("test cluster ready at %s\n", c.Config.Host)
	<-ctx.Done()
	fmt.Println("stopping the test cluster")
	return c.Stop()
}

// Files in the cluster's directory.
const (
	pidFile       = "test-cluster.pid"
	readyFile     = "ready"
	logFile       = "test-cluster.log"
	managerConfig = "manager.yaml"
)

// managerYAML is a manager configuration for kubernetes mode on the test
// cluster. Its Pods run on this host, so file:// storage is shared with them.
func managerYAML(kubeconfig, namespace string) []byte {
	return fmt.Appendf(nil, `# A manager configuration for kubernetes mode on the test cluster
# (written by test-cluster start):
#   flyte-manager start --config %s
executor:
  type: kubernetes
  kubernetes:
    kubeconfig: %s
    namespace: %s
    # The node agent runs Pods on this host: file:// storage is shared.
    sharedFileStorage: true
`, filepath.Join(filepath.Dir(kubeconfig), managerConfig), kubeconfig, namespace)
}

// sayTaskRuntime says which Python the node agent will run tasks with:
// the node has no images, a task's `a0` comes from the PATH the cluster
// starts with, and without one every task fails to start.
func sayTaskRuntime(ctx context.Context, o options) {
	if o.runner == nodeagent.RunNoop {
		return
	}
	if desc, ok := nodeagent.TaskRuntime(ctx, nil); ok {
		fmt.Println("Node agent: " + desc + ".")
	} else {
		fmt.Fprintln(os.Stderr, "WARNING: "+desc+".")
	}
}

func hint(o options) string {
	kubectl := filepath.Join(testcluster.AssetsDir(), "kubectl")
	if o.assets != "" {
		kubectl = filepath.Join(o.assets, "kubectl")
	}
	return fmt.Sprintf(`The test cluster runs (data and logs in %[1]s).
  export KUBECONFIG=%[2]s
  %[3]s get nodes
  flyte-manager start --config %[4]s
Stop it with: make test-cluster-stop
`, o.dir, o.path("kubeconfig"), kubectl, o.path(managerConfig))
}

// errNotRunning says there is no cluster process for the directory.
var errNotRunning = errors.New("not running")
