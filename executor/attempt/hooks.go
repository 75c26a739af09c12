package attempt

import (
	"context"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/store"
)

// Hooks are the services that join planning; a nil hook means none.
type Hooks struct {
	Cache   CacheHook
	Secrets SecretHook
}

// CacheHook is where the output cache joins planning: a lookup that finds
// the outputs of an earlier run of the same task and inputs returns the
// event to record instead of running the attempt (nil: run it).
type CacheHook interface {
	Lookup(ctx context.Context, a *store.Action, spec *task.TaskSpec) (machine.Event, error)
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
