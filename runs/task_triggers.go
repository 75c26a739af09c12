package runs

import (
	"context"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

// TaskTriggers keeps the triggers DeployTask carries (the trigger service,
// which the composition hands over): checked before the task version is
// written, stored pinned to it after.
type TaskTriggers interface {
	CheckTaskTriggers(id store.TaskID, ts []*task.TaskTrigger) error
	DeployTaskTriggers(ctx context.Context, id store.TaskID, ts []*task.TaskTrigger) error
}

// Option configures the services Setup mounts.
type Option func(*options)

type options struct {
	triggers TaskTriggers
	auth     config.Auth
}

// WithAuth makes AuthMetadataService answer from the auth configuration
// (without it, as with auth off).
func WithAuth(a config.Auth) Option { return func(o *options) { o.auth = a } }

// WithTaskTriggers makes DeployTask deploy the triggers it carries through
// t; without it, DeployTask refuses triggers.
func WithTaskTriggers(t TaskTriggers) Option { return func(o *options) { o.triggers = t } }

// WithTriggers is WithTaskTriggers on a TaskService built alone.
func (s *TaskService) WithTriggers(t TaskTriggers) *TaskService {
	s.triggers = t
	return s
}
