package compose

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/s3test"
)

// TestStorageWithoutConditionalWrites: the manager refuses, at start, an
// S3 store that ignores If-None-Match, naming the setting that accepts it;
// with that setting it starts and warns.
func TestStorageWithoutConditionalWrites(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t, s3test.WithoutConditionalWrites())
	st := config.Storage{URL: srv.StorageURL("p"), S3: config.S3Storage{
		Endpoint: srv.URL, Region: s3test.Region, AccessKeyID: s3test.AccessKeyID,
		SecretAccessKey: s3test.SecretAccessKey, ForcePathStyle: true,
	}}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	_, err := openStorage(ctx, st, nil, log)
	if err == nil || !strings.Contains(err.Error(), "ignores conditional writes") || !strings.Contains(err.Error(), "storage.s3.emulateConditionalWrites") {
		t.Fatalf("openStorage = %v, want a refusal naming storage.s3.emulateConditionalWrites", err)
	}
	st.S3.EmulateConditionalWrites = true
	blobs, err := openStorage(ctx, st, nil, log)
	if err != nil {
		t.Fatalf("with emulateConditionalWrites: %v", err)
	}
	defer blobs.Close()
	if !strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), s3test.SecretAccessKey) {
		t.Fatalf("log = %q, want a warning without the secret key", logs.String())
	}

	// A store that honours them passes; wrong credentials are refused at start.
	good := s3test.Start(t)
	st = config.Storage{URL: good.StorageURL(""), S3: config.S3Storage{
		Endpoint: good.URL, Region: s3test.Region, AccessKeyID: s3test.AccessKeyID,
		SecretAccessKey: s3test.SecretAccessKey, ForcePathStyle: true,
	}}
	b2, err := openStorage(ctx, st, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	b2.Close()
	st.S3.AccessKeyID = "nobody"
	if _, err := openStorage(ctx, st, nil, log); err == nil || strings.Contains(err.Error(), s3test.SecretAccessKey) {
		t.Fatalf("openStorage with a wrong key = %v, want an error without the secret", err)
	}
}
