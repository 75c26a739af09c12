package attempt

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"fmgr.dev/executor/contract"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/store"
)

// Hooks are the services that join planning; a nil hook means none.
type Hooks struct {
	Cache   CacheHook
	Secrets SecretHook
	// Storage is how attempts reach the manager's blob store; nil: they
	// need nothing beyond the paths (a local file store).
	Storage *StorageAccess
	// Tracer, when set, makes a span of every attempt (trace.go): nil
	// when tracing is off, and then nothing is kept.
	Tracer trace.Tracer
	// Credential, when set (auth.mode required), gives each attempt the
	// credential its task process calls the API with.
	Credential *CredentialAccess
}

// CredentialAccess is how attempts authenticate to the manager's API: a
// credential of their own, scoped to their run, delivered like a secret
// (contract.EnvTaskToken) and read by the SDK through its ExternalCommand
// auth (contract.TaskAuth).
type CredentialAccess struct {
	// TLS: the endpoint attempts reach speaks TLS (the SDK sends
	// credentials over TLS only).
	TLS bool
	// SkipVerify: the task trusts the certificate the endpoint presents
	// (the manager's own generated one, which a task cannot verify).
	SkipVerify bool
	// Mint returns the credential of a's current attempt, valid for at
	// least valid (the attempt's time limit; 0: none).
	Mint func(a *store.Action, valid time.Duration) string
	// MintApp, when set, returns the credential of app k's replicas
	// (internal/appcred); nil gives apps none.
	MintApp func(k appruntime.Key) string
}

// CredentialSecretKey is the Key of the secret carrying an attempt's
// credential.
const CredentialSecretKey = "flyte-manager:task-credential"

// StorageAccess is what every attempt is given to reach the blob store (an
// S3 store's endpoint and credentials, under the names the SDK reads).
type StorageAccess struct {
	// Env are the variables that are not secret (endpoint, region).
	Env []contract.KV
	// Secrets are the credentials, delivered like the task's own secrets
	// (contract.Secret with EnvVar set): never in Env, a log or a spec.
	// Their keys start with StorageSecretPrefix.
	Secrets []contract.Secret
	// Scoped, when set, gives each attempt credentials of its own in
	// place of Secrets (same keys): limited to what the attempt's run may
	// touch, and valid for at least valid (the attempt's time limit, 0 for
	// none). Secrets then stay for what is not an attempt (apps).
	Scoped func(a *store.Action, valid time.Duration) ([]contract.Secret, error)
}

// StorageSecretPrefix starts the Key of StorageAccess secrets: a driver
// gives those to whatever moves the attempt's data besides the task (the
// kubernetes copilot), and the task's own secrets to the task only.
const StorageSecretPrefix = "storage:"

// IsStorageSecret says whether s is one of StorageAccess's secrets.
func IsStorageSecret(s contract.Secret) bool { return strings.HasPrefix(s.Key, StorageSecretPrefix) }

// CacheHook is where the output cache joins an action's life, for tasks
// the SDK declared discoverable (cache=...): before an attempt starts, and
// once the action ended.
type CacheHook interface {
	// Check looks the action's outputs up and, for a serializable task,
	// reserves the right to compute them (owner: the action).
	Check(ctx context.Context, q CacheQuery) (CacheCheck, error)
	// Finish is called when the action ends: a success's outputs (at
	// outDir) are stored, and every reservation the action holds is
	// released, whatever the ending. It returns the cache status to record
	// (0: leave it). q.Spec may be nil (the spec was not loaded): then only
	// the reservations are released.
	Finish(ctx context.Context, q CacheQuery, succeeded bool, outDir string) core.CatalogCacheStatus
}

// CacheQuery is what the cache is asked about: the action, its task and
// what its run says about the cache (RunSpec.overwrite_cache,
// cache_config).
type CacheQuery struct {
	Action *store.Action
	Spec   *task.TaskSpec
	// Overwrite: compute the outputs again and replace the cached ones.
	Overwrite bool
	// Scope is the run's cache_lookup_scope.
	Scope task.CacheLookupScope
}

// CacheCheck is the cache's answer before an attempt starts.
type CacheCheck struct {
	// Status is recorded with a hit (CACHE_HIT). An attempt that runs is
	// recorded CACHE_MISS when it starts (CACHE_SKIPPED in a run that
	// overwrites the cache), whatever Status says: the lookup is over.
	Status core.CatalogCacheStatus
	// HitURI is the directory of cached outputs: the action succeeds with
	// them and no attempt runs.
	HitURI string
	// Wait says why the attempt may not start yet (another action holds
	// the reservation); planning is due again after RetryAfter.
	Wait       string
	RetryAfter time.Duration
}

// Discoverable reports whether spec's outputs are cached.
func Discoverable(spec *task.TaskSpec) bool {
	return spec.GetTaskTemplate().GetMetadata().GetDiscoverable()
}

// SecretHook is where secrets join planning: it looks up the values of the
// secrets an attempt's task requests, for the action's project and domain.
// The values reach the attempt only as Launch.Secrets, which each driver
// delivers its own way (never into a log, an event or a Pod spec).
type SecretHook interface {
	// Values returns the value of each of names that exists for a; a name
	// missing from the map does not exist. Errors are the platform's (the
	// database, the keyring), never a missing secret.
	Values(ctx context.Context, a *store.Action, names []string) (map[string][]byte, error)
}
