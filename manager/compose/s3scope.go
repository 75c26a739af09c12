package compose

import (
	"path"
	"time"

	"fmgr.dev/dataproxy"
	"fmgr.dev/executor/contract"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/s3serve"
	"fmgr.dev/internal/store"
)

// Scoped keys of the S3 endpoint (docs/storage.md): every attempt gets a
// key of its own, derived from the endpoint's, that writes only under its
// run's base and reads only its project/domain's data.

const (
	// scopedKeyGrace is how long an attempt's key outlives its time limit
	// (clocks, the last upload of outputs).
	scopedKeyGrace = time.Hour
	// scopedKeyUnlimited is the life of the key of an attempt without a
	// time limit.
	scopedKeyUnlimited = 30 * 24 * time.Hour
)

// attemptGrant is what an attempt of a may do through the endpoint, for
// at least valid (0: no limit): write its run's base (runBaseKey, as a
// storage key); read that, its project/domain's runs (cache hits point at
// other runs' outputs), uploads (code bundles, files the client uploaded)
// and run inputs, and its own inputs file (inputsKey; a run's inputs may
// lie under the run_base_dir the client named, outside all of these). With
// cache.crossProjectLookup a hit may point at another project's run of the
// org, so the org's runs are readable.
func attemptGrant(a *store.Action, runBaseKey, inputsKey string, valid time.Duration, crossProject bool, now time.Time) s3serve.Grant {
	sc := runlayout.ScopeDir(a.Org, a.Project, a.Domain)
	runs := runlayout.RunBaseKey(a.Org, a.Project, a.Domain, "")
	if crossProject {
		runs = path.Dir(path.Dir(runs))
	}
	var files []string
	if inputsKey != "" {
		files = []string{inputsKey}
	}
	life := scopedKeyUnlimited
	if valid > 0 {
		life = valid + scopedKeyGrace
	}
	return s3serve.Grant{
		Read:    []string{runs, path.Join(dataproxy.UploadPrefix, sc), path.Join(runlayout.OffloadedInputsRoot, sc)},
		Write:   []string{runBaseKey},
		Files:   files,
		Expires: now.Add(life),
	}
}

// scopedSecrets mints the key of a's attempt, as the attempt's storage
// secrets (the same variables the endpoint's own key travels in).
func (e *s3Endpoint) scopedSecrets(blobs *blob.Store, crossProject bool) func(*store.Action, time.Duration) ([]contract.Secret, error) {
	return func(a *store.Action, valid time.Duration) ([]contract.Secret, error) {
		// A base outside the store (it cannot be: runs are created with one
		// in it) would get no write at all.
		base, _ := blobs.Key(a.RunOutputBase)
		var inputs string
		if a.InputURI != "" { // none for an app's replica
			inputs, _ = blobs.Key(runlayout.InputFile(a.InputURI))
		}
		id, secret := s3serve.ScopedKey(e.secret, attemptGrant(a, base, inputs, valid, crossProject, time.Now()))
		access := e.access()
		access.AccessKeyID, access.SecretAccessKey = id, secret
		_, sec := access.ProcessEnv()
		return storageSecrets(sec), nil
	}
}
