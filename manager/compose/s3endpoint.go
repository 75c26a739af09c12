package compose

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/dataproxy"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/s3serve"
	"fmgr.dev/internal/server"
)

// s3EndpointRegion is the region clients sign for; the endpoint accepts
// any, and tasks are told this one.
const s3EndpointRegion = "us-east-1"

// s3Endpoint is storage.s3Endpoint once its address is bound.
type s3Endpoint struct {
	ln net.Listener
	// url is the endpoint as tasks on this host reach it.
	url           string
	bucket        string
	keyID, secret string
	taskLocations bool // tasks are given s3://<bucket>/... locations
	// crossProject: cache hits may point at other projects' runs of the
	// org (cache.crossProjectLookup), which attempts' keys then read.
	crossProject   bool
	staging        string
	shutdownWithin time.Duration
}

// listenS3Endpoint binds storage.s3Endpoint.listen when it serves: with
// file:// storage and a listen address. A busy address costs only the
// endpoint, so it is logged and the manager carries on with tasks given
// file locations. The key is the configured one or the home's generated
// one.
func listenS3Endpoint(cfg *config.Config, log *slog.Logger) (*s3Endpoint, error) {
	e := cfg.Storage.S3Endpoint
	if e.Listen == "" || !strings.HasPrefix(cfg.Storage.URL, "file://") {
		return nil, nil
	}
	id, secret := e.AccessKeyID, e.SecretAccessKey
	if id == "" {
		var err error
		if id, secret, err = s3serve.LoadOrCreateKey(filepath.Join(cfg.Home, s3serve.KeyFile)); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", e.Listen)
	if err != nil {
		log.Warn("not serving the S3 endpoint: its address is busy; tasks get file locations; set storage.s3Endpoint.listen to another",
			"addr", e.Listen, "error", err)
		return nil, nil
	}
	return &s3Endpoint{
		ln: ln, url: "http://" + reachable(ln.Addr()), bucket: e.Bucket, keyID: id, secret: secret,
		taskLocations:  e.TaskLocations == config.TaskLocationsS3 && cfg.Executor.Type == config.ExecutorLocal,
		crossProject:   cfg.Cache.CrossProjectLookup,
		staging:        filepath.Join(cfg.Home, "s3-uploads"),
		shutdownWithin: cfg.Server.ShutdownTimeout,
	}, nil
}

// reachable is addr as a process on this host dials it: a wildcard
// address becomes loopback.
func reachable(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// storeOptions are the blob options that make the file store name its
// objects as the endpoint serves them, when tasks are to get s3 locations.
func (e *s3Endpoint) storeOptions(o blob.Options) blob.Options {
	if e != nil && e.taskLocations {
		o.FileAlias = "s3://" + e.bucket
	}
	return o
}

// access is what tasks need to reach the endpoint, as blob options (for
// S3Options.ProcessEnv).
func (e *s3Endpoint) access() blob.S3Options {
	return blob.S3Options{Endpoint: e.url, Region: s3EndpointRegion, AccessKeyID: e.keyID, SecretAccessKey: e.secret, ForcePathStyle: true}
}

// serve mounts the S3 API over blobs on the endpoint's listener, as a
// worker of srv.
func (e *s3Endpoint) serve(srv *server.Server, blobs *blob.Store, log *slog.Logger) error {
	h, err := s3serve.New(blobs, s3serve.Options{
		Bucket: e.bucket, Keys: map[string]string{e.keyID: e.secret}, StagingDir: e.staging, Log: log,
		// Attempts' keys (scopedSecrets) are derived from the endpoint's.
		ScopedMaster: e.secret,
		// What only the manager writes: uploaded code bundles and files,
		// and runs' inputs; no key of the endpoint replaces them.
		ReadOnly: []string{dataproxy.UploadPrefix + "/", runlayout.OffloadedInputsRoot + "/"},
	})
	if err != nil {
		_ = e.ln.Close()
		return err
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	srv.AddCloser("S3 endpoint listener", func(context.Context) error {
		if err := e.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})
	srv.AddWorker("S3 endpoint", func(ctx context.Context) error {
		served := make(chan error, 1)
		go func() { served <- hs.Serve(e.ln) }()
		select {
		case err := <-served:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		case <-ctx.Done():
		}
		// Let uploads in flight finish, within the shutdown timeout.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.shutdownWithin)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			_ = hs.Close()
		}
		<-served
		return nil
	})
	log.Info("serving the S3 endpoint", "url", e.url, "bucket", e.bucket, "taskLocations", e.taskLocations)
	return nil
}

// ClientStorageEnv is the environment through which an SDK client reads
// the manager's blobs itself (File.download, Dir.download of an output),
// under the names the SDK reads: the S3 endpoint with its key for file://
// storage (listen is the endpoint's address as the client reaches it, ""
// for storage.s3Endpoint.listen), the store's endpoint and static keys for
// s3:// storage. Secret values are in it: it is for the user to see, never
// for a log.
func ClientStorageEnv(cfg *config.Config, listen string) ([]string, error) {
	var access blob.S3Options
	switch {
	case strings.HasPrefix(cfg.Storage.URL, "s3://"):
		access = S3Options(cfg.Storage.S3)
	case strings.HasPrefix(cfg.Storage.URL, "file://") && cfg.Storage.S3Endpoint.Listen != "":
		e := cfg.Storage.S3Endpoint
		if listen == "" {
			listen = e.Listen
		}
		host, port, err := net.SplitHostPort(listen)
		if err != nil || port == "0" {
			return nil, fmt.Errorf("storage.s3Endpoint.listen is %q: name the endpoint with --endpoint HOST:PORT", listen)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
		}
		id, secret := e.AccessKeyID, e.SecretAccessKey
		if id == "" {
			if id, secret, err = s3serve.LoadOrCreateKey(filepath.Join(cfg.Home, s3serve.KeyFile)); err != nil {
				return nil, err
			}
		}
		access = blob.S3Options{Endpoint: "http://" + net.JoinHostPort(host, port), Region: s3EndpointRegion, AccessKeyID: id, SecretAccessKey: secret, ForcePathStyle: true}
	default:
		return nil, fmt.Errorf("storage %s has no S3 endpoint (storage.s3Endpoint.listen is empty): clients read its files by path", cfg.Storage.URL)
	}
	env, secret := access.ProcessEnv()
	maps.Copy(env, secret)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out, nil
}
