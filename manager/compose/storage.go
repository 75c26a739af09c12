package compose

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
)

// S3Options are the blob options of storage.s3.
func S3Options(s config.S3Storage) blob.S3Options {
	return blob.S3Options{
		Endpoint: s.Endpoint, Region: s.Region,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey,
		ForcePathStyle: s.ForcePathStyle, EmulateConditionalWrites: s.EmulateConditionalWrites,
	}
}

// openStorage opens the configured store and, for S3, proves it honours
// conditional writes (blob.Store.CheckConditionalWrites): uploads, cache
// entries and task outputs rely on create-only writes never replacing one
// another, so a store that ignores If-None-Match is refused unless
// storage.s3.emulateConditionalWrites says to live with it.
//
// With the S3 endpoint giving tasks s3 locations (ep), the file store names
// its objects as the endpoint serves them.
func openStorage(ctx context.Context, s config.Storage, ep *s3Endpoint, log *slog.Logger) (*blob.Store, error) {
	blobs, err := blob.OpenWith(ctx, s.URL, ep.storeOptions(blob.Options{S3: S3Options(s.S3)}))
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if err := blobs.CheckConditionalWrites(ctx); err != nil {
		_ = blobs.Close()
		if errors.Is(err, blob.ErrNoConditionalWrites) {
			return nil, fmt.Errorf("storage: the store at %s ignores conditional writes (a PUT with If-None-Match: * replaced an object); "+
				"use a store that honours them (AWS S3, MinIO, ...), or set storage.s3.emulateConditionalWrites: true to accept "+
				"that racing create-only writes may replace one another", s.URL)
		}
		return nil, fmt.Errorf("storage: the store at %s cannot be used: %w", s.URL, err)
	}
	if blobs.Kind() == blob.KindS3 && s.S3.EmulateConditionalWrites {
		log.Warn("storage.s3.emulateConditionalWrites is set: create-only writes look for the object first, and racing writers may replace one another", "storage", s.URL)
	}
	return blobs, nil
}

// storageAccess is what attempts are given to reach an S3 store, or the S3
// endpoint over a file store when they get its locations: its endpoint,
// region and addressing style as variables, its static credentials (if
// any) as secrets. Other stores need nothing.
func storageAccess(blobs *blob.Store, s config.Storage, ep *s3Endpoint) *attempt.StorageAccess {
	var access blob.S3Options
	switch {
	case blobs.Kind() == blob.KindS3:
		access = S3Options(s.S3)
	case ep != nil && ep.taskLocations:
		access = ep.access()
	default:
		return nil
	}
	env, secret := access.ProcessEnv()
	sa := &attempt.StorageAccess{Secrets: storageSecrets(secret)}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		sa.Env = append(sa.Env, contract.KV{Key: k, Value: env[k]})
	}
	if blobs.Kind() != blob.KindS3 {
		// The endpoint's own key stays with the manager (and apps): each
		// attempt gets a key of its own, scoped to its run.
		sa.Scoped = ep.scopedSecrets(blobs, ep.crossProject)
	}
	return sa
}

// storageSecrets are secret variables as attempts' storage secrets.
func storageSecrets(secret map[string]string) []contract.Secret {
	var out []contract.Secret
	for _, k := range slices.Sorted(maps.Keys(secret)) {
		out = append(out, contract.Secret{Key: attempt.StorageSecretPrefix + k, EnvVar: k, Value: []byte(secret[k])})
	}
	return out
}

// OpenStorage opens the configured store for a command beside a manager
// (or instead of one), naming objects as the manager does: through the S3
// endpoint's bucket when tasks get its locations. It serves nothing and
// checks nothing; the caller closes it.
func OpenStorage(ctx context.Context, cfg *config.Config) (*blob.Store, error) {
	o := blob.Options{S3: S3Options(cfg.Storage.S3)}
	e := cfg.Storage.S3Endpoint
	if e.Listen != "" && strings.HasPrefix(cfg.Storage.URL, "file://") && e.TaskLocations == config.TaskLocationsS3 && cfg.Executor.Type == config.ExecutorLocal {
		o.FileAlias = "s3://" + e.Bucket
	}
	blobs, err := blob.OpenWith(ctx, cfg.Storage.URL, o)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	return blobs, nil
}
