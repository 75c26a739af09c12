package attempt

import (
	"context"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
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

// SecretHook is where secrets join planning: the environment variables the
// task's declared secrets become. They are never logged (contract.Env
// redacts values in logs).
type SecretHook interface {
	Env(ctx context.Context, a *store.Action, spec *task.TaskSpec) ([]*core.KeyValuePair, error)
}
