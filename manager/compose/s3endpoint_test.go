package compose

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/s3serve"
	"fmgr.dev/internal/store"
)

// The S3 endpoint binds its address with file storage; a busy address is
// logged and tasks keep paths. When it serves, the store names objects
// s3://<bucket>/ and attempts get the endpoint and its key (as secrets).
func TestListenS3Endpoint(t *testing.T) {
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.Storage.URL = "file://" + filepath.Join(cfg.Home, "blobs")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg.Storage.S3Endpoint.Listen = busy.Addr().String()
	if ep, err := listenS3Endpoint(&cfg, logger); err != nil || ep != nil {
		t.Fatalf("busy address: %v, %v", ep, err)
	}
	if !strings.Contains(logs.String(), "not serving the S3 endpoint") {
		t.Errorf("no warning about the busy address:\n%s", logs.String())
	}

	cfg.Storage.S3Endpoint.Listen = "0.0.0.0:0"
	ep, err := listenS3Endpoint(&cfg, logger)
	if err != nil || ep == nil {
		t.Fatalf("free address: %v, %v", ep, err)
	}
	defer ep.ln.Close()
	if !strings.HasPrefix(ep.url, "http://127.0.0.1:") || !ep.taskLocations {
		t.Errorf("endpoint %q (task locations %v), want loopback for a wildcard address", ep.url, ep.taskLocations)
	}
	id, secret, err := s3serve.LoadOrCreateKey(filepath.Join(cfg.Home, s3serve.KeyFile))
	if err != nil || id != ep.keyID || secret != ep.secret {
		t.Fatalf("the endpoint's key is not the home's: %v", err)
	}
	blobs, err := openStorage(context.Background(), cfg.Storage, ep, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	if got := blobs.URI("k"); got != "s3://flyte/k" {
		t.Errorf("URI = %q", got)
	}
	sa := storageAccess(blobs, cfg.Storage, ep)
	env := map[string]string{}
	for _, kv := range sa.Env {
		env[kv.Key] = kv.Value
	}
	if env[blob.EnvS3Endpoint] != ep.url || env[blob.EnvS3AddressingStyle] != "path" {
		t.Errorf("attempts' environment %v", env)
	}
	for _, kv := range sa.Env {
		if kv.Value == secret {
			t.Errorf("the secret key is in the environment as %s", kv.Key)
		}
	}
	got := map[string]string{}
	for _, s := range sa.Secrets {
		got[s.EnvVar] = string(s.Value)
	}
	if got[blob.EnvS3AccessKeyID] != id || got[blob.EnvS3SecretAccessKey] != secret {
		t.Errorf("attempts' secrets name %v", got)
	}
	// Each attempt gets a key of its own instead (s3scope.go), not the
	// endpoint's.
	scoped, err := sa.Scoped(&store.Action{ActionKey: store.RunKey{Project: "p", Domain: "d", RunName: "r1"}.Action("a0"),
		RunOutputBase: blobs.URI("runs/_/p/d/r1")}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{}
	for _, s := range scoped {
		mine[s.EnvVar] = string(s.Value)
	}
	if mine[blob.EnvS3AccessKeyID] == "" || mine[blob.EnvS3AccessKeyID] == id || mine[blob.EnvS3SecretAccessKey] == "" || mine[blob.EnvS3SecretAccessKey] == secret {
		t.Errorf("an attempt's key is not one of its own (%d secrets)", len(scoped))
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the secret key was logged")
	}
	client, err := ClientStorageEnv(&cfg, ep.ln.Addr().String())
	if err != nil || !strings.Contains(strings.Join(client, "\n"), blob.EnvS3SecretAccessKey+"="+secret) {
		t.Errorf("client env %v, %v", client, err)
	}

	// Paths for the Kubernetes executor, and for taskLocations: file.
	for _, mod := range []func(*config.Config){
		func(c *config.Config) { c.Executor.Type = config.ExecutorKubernetes },
		func(c *config.Config) { c.Storage.S3Endpoint.TaskLocations = config.TaskLocationsFile },
	} {
		c := cfg
		mod(&c)
		c.Storage.S3Endpoint.Listen = "127.0.0.1:0"
		ep, err := listenS3Endpoint(&c, logger)
		if err != nil || ep == nil {
			t.Fatal(err)
		}
		ep.ln.Close()
		if ep.taskLocations || storageAccess(blobs, c.Storage, ep) != nil {
			t.Errorf("tasks get s3 locations with executor %s, taskLocations %s", c.Executor.Type, c.Storage.S3Endpoint.TaskLocations)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.Home, "s3-uploads")); err == nil {
		t.Error("the staging directory exists before the endpoint serves")
	}
}
