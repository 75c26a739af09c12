// Command flyte-manager is the Flyte 2 control plane in one binary: it
// serves every API on one port and runs the task executor in-process.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"fmgr.dev/internal/config"
)

// Set at build time: go build -ldflags "-X main.version=v1.2.3 -X main.commit=abc123".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newRootCmd(stdout, stderr)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "flyte-manager: %v\n", err)
		return 1
	}
	return 0
}

// globalFlags are the flags every command accepts.
type globalFlags struct {
	configFiles []string
	home        string
	host        string
	port        int
	dsn         string
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "flyte-manager",
		Short: "Flyte 2 control plane in one binary",
		Long: `flyte-manager serves the Flyte 2 control-plane APIs (Connect, gRPC and gRPC-Web on one
port) and runs the task executor in the same process. With no configuration it keeps
everything in ~/.flyte-manager: a SQLite database, a blob directory, and tasks run as
local processes.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)

	pf := root.PersistentFlags()
	pf.StringArrayVarP(&g.configFiles, "config", "c", nil,
		"configuration `file`, directory or glob (repeatable; merged in order)")
	pf.StringVar(&g.home, "home", "", "data `dir` (home; env FLYTE_MANAGER_HOME)")
	pf.StringVar(&g.host, "host", "", "interface to listen on (server.host)")
	pf.IntVar(&g.port, "port", 0, "port to listen on, 0 for any free port (server.port)")
	pf.StringVar(&g.dsn, "db", "", "database `DSN`: sqlite://<path> or postgres://... (database.dsn)")

	root.AddCommand(
		newStartCmd(g),
		newMigrateCmd(g),
		newConfigCmd(g),
		newCacheCmd(g),
		newSecretsCmd(g),
		newAPIKeyCmd(g),
		newQueuesCmd(g),
		newKubeconfigCmd(g),
		newStorageCmd(g),
		newGCCmd(g),
		newSandboxCmd(g),
		newImageCmd(g),
		newVersionCmd(),
		newCopilotCmd(),
	)
	return root
}

// loadConfig assembles the configuration from files, environment and the
// flags the user set.
func (g *globalFlags) loadConfig(cmd *cobra.Command) (*config.Config, error) {
	overrides := map[string]any{}
	flags := cmd.Flags()
	if flags.Changed("home") {
		overrides["home"] = g.home
	}
	if flags.Changed("host") {
		overrides["server.host"] = g.host
	}
	if flags.Changed("port") {
		overrides["server.port"] = g.port
	}
	if flags.Changed("db") {
		overrides["database.dsn"] = g.dsn
	}
	return config.Load(config.Sources{Files: g.configFiles, Overrides: overrides})
}
