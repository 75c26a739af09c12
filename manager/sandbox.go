package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"fmgr.dev/internal/config"
	"fmgr.dev/kubeapi"
	"fmgr.dev/manager/compose"
)

// The sandbox's contract, the one the SDK's `flyte start devbox` starts a
// container with (flyte/cli/_devbox.py): these paths, env and ports.
const (
	sandboxStorage     = "/var/lib/flyte/storage" // every piece of persistent state
	sandboxConfigDir   = "/var/lib/flyte/config"  // an optional config.yaml merged over the defaults
	sandboxAPIPort     = 30080                    // the API, /healthz and the console at /v2
	sandboxKubePort    = 6443                     // the Kubernetes-style API
	sandboxS3Port      = 30002                    // the S3 endpoint over the storage
	sandboxAppsPort    = 30081                    // apps' public URLs
	sandboxContext     = "flyte-devbox"           // the kubeconfig context the SDK switches to
	envKubeconfigOut   = "K3S_KUBECONFIG_OUTPUT"  // where to write the kubeconfig
	envDev             = "FLYTE_DEV"              // True: debug logging (see docs/sandbox.md)
	sandboxConfigFile  = "config.yaml"
	sandboxDefaultFile = "sandbox-defaults.yaml"
)

// The S3 endpoint's key in the sandbox: the one the SDK's S3.for_sandbox()
// signs with (flyte/storage/_config.py). Well known on purpose: the
// sandbox's API port takes any command without credentials already, and
// the container is its boundary.
const (
	sandboxS3AccessKeyID     = "minio"
	sandboxS3SecretAccessKey = "miniostorage"
)

// sandboxAllowedHosts are the Host names a published port is reached by,
// on any port (docker run -p 8080:30080 gives localhost:8080).
var sandboxAllowedHosts = []string{"localhost", "127.0.0.1", "host.docker.internal"}

// newSandboxCmd is `flyte-manager sandbox`, the sandbox image's entrypoint:
// `start` with the sandbox's defaults, plus the kubeconfig the devbox
// contract asks for.
func newSandboxCmd(g *globalFlags) *cobra.Command {
	var storage, configDir, python string
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Serve as the sandbox image does (the SDK's `flyte start devbox` contract)",
		Long: "Serve with the sandbox's defaults: home " + sandboxStorage + ", the API and console on 0.0.0.0:30080,\n" +
			"the Kubernetes-style API on 0.0.0.0:6443, the S3 endpoint on 0.0.0.0:30002 (key minio/miniostorage, as the SDK's\n" +
			"S3.for_sandbox()), apps on 0.0.0.0:30081 too, tasks as local processes. " + sandboxConfigDir + "/config.yaml,\n" +
			"when present, is merged over those defaults (then any --config). With $" + envKubeconfigOut + " set, a\n" +
			"kubeconfig (context flyte-devbox) with a new token is written there at every start; earlier tokens\n" +
			"are revoked. $" + envDev + "=True turns on debug logging. auth.mode is off (the SDK's devbox config is plain\n" +
			"http, which carries no credentials): publish the ports on 127.0.0.1 only. See docs/sandbox.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadSandboxConfig(cmd, g, storage, configDir, python, envTrue(os.Getenv(envDev)))
			if err != nil {
				return err
			}
			if err := cfg.Prepare(); err != nil {
				return err
			}
			if out := os.Getenv(envKubeconfigOut); out != "" {
				if err := writeSandboxKubeconfig(cfg, out); err != nil {
					return fmt.Errorf("kubeconfig for $%s: %w", envKubeconfigOut, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "sandbox: wrote the kubeconfig (context %s) to %s\n", sandboxContext, out)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			context.AfterFunc(ctx, stop)
			return compose.Run(ctx, cfg, compose.Options{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), Version: version})
		},
	}
	f := cmd.Flags()
	f.StringVar(&storage, "storage", sandboxStorage, "the home: every piece of persistent state (the storage volume)")
	f.StringVar(&configDir, "config-dir", sandboxConfigDir, "the folder whose config.yaml, when present, is merged over the defaults")
	f.StringVar(&python, "python", "", "bin `dir` of the Python environment with the flyte SDK that runs tasks (executor.local.python)")
	return cmd
}

// loadSandboxConfig merges, in order: the manager's defaults, the sandbox's,
// configDir/config.yaml when present, then --config files, environment and
// flags as for start.
func loadSandboxConfig(cmd *cobra.Command, g *globalFlags, storage, configDir, python string, dev bool) (*config.Config, error) {
	defaults, err := writeSandboxDefaults(storage, python, dev)
	if err != nil {
		return nil, err
	}
	defer os.Remove(defaults)
	files := []string{defaults}
	if p := filepath.Join(configDir, sandboxConfigFile); fileExists(p) {
		files = append(files, p)
	}
	g.configFiles = append(files, g.configFiles...)
	return g.loadConfig(cmd)
}

// writeSandboxDefaults writes the sandbox's defaults as a config file (the
// first one merged, so config.yaml wins key by key) and returns its path.
func writeSandboxDefaults(storage, python string, dev bool) (string, error) {
	d := map[string]any{
		"home": storage,
		"server": map[string]any{
			"host":         "0.0.0.0",
			"port":         sandboxAPIPort,
			"allowedHosts": sandboxAllowedHosts,
		},
		"kubeAPI": map[string]any{
			"enabled": true,
			"listen":  net.JoinHostPort("0.0.0.0", strconv.Itoa(sandboxKubePort)),
		},
		// Apps answer on 30081 too, where the reference devbox serves them,
		// and their public URLs say so.
		"apps": map[string]any{
			"listen":    net.JoinHostPort("0.0.0.0", strconv.Itoa(sandboxAppsPort)),
			"publicURL": "http://localhost:" + strconv.Itoa(sandboxAppsPort) + config.DefaultAppsPathPrefix + "/{project}/{domain}/{name}/",
		},
		// Auth off, explicitly (so the manager warns at start and in
		// /readyz): the SDK's devbox config (`flyte create config
		// --devbox`) is plain http, over which the SDK sends no
		// credentials, so required would shut every client out. The
		// container is the boundary; docs/sandbox.md says how to publish
		// its ports on loopback only, or turn auth on.
		"auth": map[string]any{"mode": config.AuthOff},
		"storage": map[string]any{
			"s3Endpoint": map[string]any{
				"listen":          net.JoinHostPort("0.0.0.0", strconv.Itoa(sandboxS3Port)),
				"accessKeyID":     sandboxS3AccessKeyID,
				"secretAccessKey": sandboxS3SecretAccessKey,
			},
		},
	}
	// Attempts run as the manager's user (root in the image): another
	// user's attempt needs a mount namespace of its own, which a container
	// gets only with --privileged, and `docker run IMAGE` alone must work.
	// The container is the sandbox's boundary. (Mode range does not work
	// in the image yet: attempts inherit HOME=/root, closed to their uids.)
	local := map[string]any{"runAs": map[string]any{"mode": config.RunAsManager}}
	if python != "" {
		local["python"] = python
	}
	d["executor"] = map[string]any{"local": local}
	if dev {
		d["log"] = map[string]any{"level": "debug"}
	}
	b, err := yaml.Marshal(d)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "fm-"+sandboxDefaultFile)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// writeSandboxKubeconfig mints a token (revoking earlier ones: the file is
// rewritten at every start) and writes a kubeconfig for the kube API on
// 127.0.0.1, the address a published 6443 is reached at, to out. The file
// appears whole (the SDK polls for it).
func writeSandboxKubeconfig(cfg *config.Config, out string) error {
	_, port, err := net.SplitHostPort(cfg.KubeAPI.Listen)
	if err != nil || !cfg.KubeAPI.Enabled {
		return fmt.Errorf("the Kubernetes-style API is off or has no port (kubeAPI.listen %q)", cfg.KubeAPI.Listen)
	}
	dir := compose.KubeAPIDir(cfg)
	host, _, _ := net.SplitHostPort(cfg.KubeAPI.Listen)
	_, caPEM, err := kubeapi.EnsureCertificate(dir, host)
	if err != nil {
		return err
	}
	token, err := kubeapi.MintToken(dir, true)
	if err != nil {
		return err
	}
	b, err := kubeapi.NamedKubeconfig(sandboxContext, "https://"+net.JoinHostPort("127.0.0.1", port), caPEM, token, compose.KubeDefaultNamespace(cfg))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// envTrue reads a boolean the way the SDK writes one ("True"/"False").
func envTrue(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && b
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}
