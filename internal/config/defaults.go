package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/internal/ident"
)

// Attempt log caps (executor.local.maxLogBytes): the default, and the
// smallest accepted (the log's rolling tail must hold several of the
// longest log records, 64 KiB each).
const (
	DefaultMaxLogBytes = 100 << 20
	MinMaxLogBytes     = 1 << 20
	// DefaultEnvironmentsMaxBytes caps the image environments' cache.
	DefaultEnvironmentsMaxBytes = 20 << 30
)

// DefaultConsoleLocalListen is where the SDK's console links for a
// localhost:8090 endpoint point (its Console class rewrites that endpoint
// to localhost:8080).
const DefaultConsoleLocalListen = "127.0.0.1:8080"

// DefaultKubeAPIListen is where the Kubernetes-style API listens: beside
// the API's 8090, on loopback.
const DefaultKubeAPIListen = "127.0.0.1:8091"

// DefaultAppsPathPrefix is where the manager serves apps by default:
// <base URL>/apps/<project>/<domain>/<name>/.
const DefaultAppsPathPrefix = "/apps"

// DefaultS3EndpointListen is where the S3 endpoint over file:// storage
// listens: beside the API's 8090 and kubectl's 8091, on loopback.
const DefaultS3EndpointListen = "127.0.0.1:8092"

// DefaultS3EndpointBucket is the S3 endpoint's bucket name.
const DefaultS3EndpointBucket = "flyte"

// DefaultOrg is server.orgs.default's default: the org task processes of
// runs without one are given (ident.LocalOrg), so that what the SDK, its
// task processes and the manager name a run agree.
const DefaultOrg = ident.LocalOrg

// ImageName is the name `make image` (hack/image) gives the manager's image:
// its OCI layout and tarballs are tagged ImageName:latest and
// ImageName:<version>, which `docker load` and `kind load` keep.
const ImageName = "flyte-manager"

// DefaultCopilotImage is executor.kubernetes.copilotImage's default: the
// manager's own image as `make image` tags it (any image with this binary
// on PATH as flyte-manager will do), which raw container Pods run
// `flyte-manager copilot` in. The project publishes none: a cluster names
// the one it built and loaded or pushed (the chart sets its own image).
const DefaultCopilotImage = ImageName + ":latest"

// Default returns the built-in configuration: the single place defaults are
// defined. Fields left empty here are derived from other values once the
// sources are merged (see applyDerivedDefaults):
//
//	database.dsn          sqlite://<home>/flyte-manager.db
//	storage.url           file://<home>/blobs
//	storage.signingKey    generated once into <home>/signing.key (by Prepare)
//	storage.s3.*          empty: AWS, its default credential chain
//	storage.s3Endpoint.accessKeyID, .secretAccessKey
//	                      generated once into <home>/s3-endpoint.key (by the composition)
//	secrets.keyFile       <home>/secrets.keyring unless secrets.key is set
//	                      (the secret service generates it on first start)
//	executor.local.python ./.venv/bin if it exists, else the directory of a0 on PATH
//	executor.local.workDir <home>/work
//	executor.local.resources.cpus, .memory, .gpus  detected by the executor at start
//	auth.mode "auto"      off or required by the listeners (ResolveAuth)
func Default() Config {
	return Config{
		Home: "~/.flyte-manager",
		Server: Server{
			Host:            "127.0.0.1",
			Port:            8090,
			ExternalURL:     "",
			MaxRequestBytes: 64 << 20,
			ShutdownTimeout: 30 * time.Second,
			AllowedHosts:    []string{},
			CORS:            CORS{AllowedOrigins: []string{}},
			// Long enough for a client on a slow link to deliver its next
			// packet, short enough that a stalled body does not hold a
			// connection and a goroutine for long.
			BodyReadTimeout: 30 * time.Second,
			IdleTimeout:     120 * time.Second,
			// As many streams as a busy SDK client opens (watches plus
			// fan-out calls) with headroom; http2's own default is 250.
			MaxConcurrentStreams: 250,
			// The SDK holds one or two watches per run it follows and the
			// console a few per tab: far below these, while a client
			// opening streams in a loop is stopped long before it costs
			// every other watcher.
			MaxStreamsPerClient:       1000,
			MaxGlobalWatchesPerClient: 32,
			Orgs:                      Orgs{Default: DefaultOrg},
		},
		Database: Database{
			DSN:          "",
			MaxOpenConns: 0,
		},
		Storage: Storage{
			URL:        "",
			SigningKey: "",
			S3Endpoint: S3Endpoint{
				Listen:        DefaultS3EndpointListen,
				Bucket:        DefaultS3EndpointBucket,
				TaskLocations: TaskLocationsS3,
			},
		},
		Executor: Executor{
			Type: ExecutorLocal,
			Local: LocalExecutor{
				Python:         "",
				WorkDir:        "",
				MaxParallelism: 2 * runtime.NumCPU(),
				SystemRetries:  3,
				LeaseTTL:       15 * time.Second,
				MaxLogBytes:    DefaultMaxLogBytes,
				LogLinks:       []LogLink{DefaultLogLink},
				// Warm start: a0 attempts fork from an interpreter that has
				// imported the SDK's dependencies (Python start-up and those
				// imports cost more than a small task); off falls back to a
				// fresh interpreter per attempt.
				WarmStart:    true,
				Containers:   LocalContainers{Runtime: ContainerRuntimeRunc},
				Environments: LocalEnvironments{MaxBytes: DefaultEnvironmentsMaxBytes},
				RunAs:        RunAs{Mode: RunAsRange, FirstUID: DefaultRunAsFirstUID, Count: DefaultRunAsCount},
				// wait, as a cluster keeps a Pod that fits no node Pending:
				// examples written for a cluster (max_queued_time on a GPU
				// task) behave the same, and the wait says what is missing.
				Resources: LocalResources{Unsatisfiable: UnsatisfiableWait, CPUs: "", Memory: "", GPUs: -1},
			},
			Kubernetes: KubernetesExecutor{
				Namespace:       "flyte",
				ServiceAccounts: []ServiceAccountGrant{}, // tasks may name only serviceAccount
				SystemRetries:   3,
				LeaseTTL:        15 * time.Second,
				GCInterval:      30 * time.Minute,
				GCTTL:           time.Hour,
				QPS:             1000,
				Burst:           2000,
				CopilotImage:    DefaultCopilotImage,
				LogLinks:        []LogLink{DefaultKubernetesLogLink},
			},
		},
		Projects: Projects{
			AutoCreate: true,
			Seed:       []string{"flytesnacks"},
		},
		Cache: Cache{
			TTL:                      0,
			MaxEntries:               1_000_000,
			MaxReservationHeartbeat:  10 * time.Second,
			HeartbeatGraceMultiplier: 3,
			SweepInterval:            time.Minute,
			CrossProjectLookup:       false,
		},
		Log: Log{
			Level:  "info",
			Format: "text",
		},
		Secrets: Secrets{
			Key:     "",
			KeyFile: "",
		},
		// No queues: queue= must name one the operator declared.
		Queues: []Queue{},
		Console: Console{
			Enabled:     true,
			LocalListen: DefaultConsoleLocalListen,
		},
		KubeAPI: KubeAPI{
			Enabled: true,
			Listen:  DefaultKubeAPIListen,
		},
		Apps: Apps{
			PathPrefix: DefaultAppsPathPrefix,
			Network:    "auto",
		},
		// Far above what an executor reports about an attempt (a few
		// phases, a few dozen cluster events; the reference's executor
		// numbers a phase's reports in single digits), far below what
		// makes a details answer heavy: 1 MiB of history per attempt.
		Events: Events{
			MaxPerAttempt:   1000,
			MaxEventBytes:   64 << 10,
			MaxAttemptBytes: 1 << 20,
		},
		Auth:      defaultAuth(),
		Telemetry: defaultTelemetry(),
		Retention: Retention{
			Default:    "720h",
			Rules:      []RetentionRule{},
			InputGrace: 24 * time.Hour,
			Notice:     24 * time.Hour,
			Interval:   time.Hour,
			BatchSize:  100,
			BatchPause: time.Second,
		},
		Triggers: Triggers{
			CheckInterval: time.Second,
			CatchUp:       "all",
			MaxCatchUp:    100,
			Minute:        time.Minute,
		},
	}
}

// applyDerivedDefaults expands "~" in paths, makes the data directory
// absolute and fills the defaults that depend on it or on the machine.
func (c *Config) applyDerivedDefaults() error {
	home, err := absPath(c.Home)
	if err != nil {
		return fmt.Errorf("home: %w", err)
	}
	c.Home = home
	if home == "" {
		return nil // Validate reports it
	}
	if c.Database.DSN == "" {
		c.Database.DSN = "sqlite://" + filepath.ToSlash(filepath.Join(home, "flyte-manager.db"))
	}
	if c.Storage.URL == "" {
		c.Storage.URL = "file://" + filepath.ToSlash(filepath.Join(home, "blobs"))
	}
	if c.Executor.Local.WorkDir == "" {
		c.Executor.Local.WorkDir = filepath.Join(home, "work")
	} else if c.Executor.Local.WorkDir, err = absPath(c.Executor.Local.WorkDir); err != nil {
		return fmt.Errorf("executor.local.workDir: %w", err)
	}
	if c.Executor.Local.Containers.Images == "" {
		c.Executor.Local.Containers.Images = filepath.Join(home, "images")
	} else if c.Executor.Local.Containers.Images, err = absPath(c.Executor.Local.Containers.Images); err != nil {
		return fmt.Errorf("executor.local.containers.images: %w", err)
	}
	if c.Executor.Local.Environments.Dir == "" {
		c.Executor.Local.Environments.Dir = filepath.Join(home, "environments")
	} else if c.Executor.Local.Environments.Dir, err = absPath(c.Executor.Local.Environments.Dir); err != nil {
		return fmt.Errorf("executor.local.environments.dir: %w", err)
	}
	if c.Executor.Local.Python == "" {
		c.Executor.Local.Python = detectPython()
	} else if c.Executor.Local.Python, err = absPath(c.Executor.Local.Python); err != nil {
		return fmt.Errorf("executor.local.python: %w", err)
	}
	if c.Secrets.Key == "" {
		if c.Secrets.KeyFile == "" {
			c.Secrets.KeyFile = filepath.Join(home, SecretsKeyringFile)
		} else if c.Secrets.KeyFile, err = absPath(c.Secrets.KeyFile); err != nil {
			return fmt.Errorf("secrets.keyFile: %w", err)
		}
	}
	if t := &c.Server.TLS; t.CertFile == "" && t.KeyFile == "" {
		t.GeneratedDir = filepath.Join(home, "tls")
	}
	if c.Executor.Kubernetes.Kubeconfig != "" {
		if c.Executor.Kubernetes.Kubeconfig, err = absPath(c.Executor.Kubernetes.Kubeconfig); err != nil {
			return fmt.Errorf("executor.kubernetes.kubeconfig: %w", err)
		}
	}
	c.ResolveAuth()
	return nil
}

// detectPython finds the bin directory of the Python environment providing
// the a0 entry point: ./.venv/bin when present, else wherever a0 is on PATH.
func detectPython() string {
	if info, err := os.Stat(filepath.Join(".venv", "bin")); err == nil && info.IsDir() {
		if abs, err := filepath.Abs(filepath.Join(".venv", "bin")); err == nil {
			return abs
		}
	}
	if a0, err := exec.LookPath("a0"); err == nil {
		if abs, err := filepath.Abs(a0); err == nil {
			return filepath.Dir(abs)
		}
	}
	return ""
}

// absPath expands a leading "~" to the user's home directory and makes p
// absolute. An empty p stays empty.
func absPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		userHome, err := os.UserHomeDir()
		if err != nil {
			return "", errors.New("cannot expand ~: " + err.Error())
		}
		p = filepath.Join(userHome, strings.TrimPrefix(p, "~"))
	}
	return filepath.Abs(p)
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
