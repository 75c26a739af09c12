package runstate

import (
	"context"
	"errors"
	"fmt"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
)

// The flyte SDK caches the location of every code bundle it uploaded, on
// the client, for a day per endpoint, project and domain; on a hit it does
// not upload again. A manager whose storage lost the bundle meanwhile (its
// data directory was deleted, its bucket emptied) would be handed a task
// that fails inside its process ("Unable to load data from ...tar.gz"),
// after a queue, a launch and the task's retries. A bundle in this
// manager's own storage can be checked before anything is created; one
// elsewhere is the user's to keep.

// bundleArgs are the runtime's options that name a code bundle, as the SDK
// writes them into the container's args: `--tgz <uri>` (a source archive)
// or `--pkl <uri>` (a pickled task).
var bundleArgs = []string{"--tgz", "--pkl"}

// codeBundle is the code bundle tmpl's process loads, "" when it loads
// none, and the option that names it.
func codeBundle(tmpl *core.TaskTemplate) (uri, option string) {
	args := tmpl.GetContainer().GetArgs()
	for i := 0; i+1 < len(args); i++ {
		for _, opt := range bundleArgs {
			if args[i] == opt {
				return args[i+1], opt
			}
		}
	}
	return "", ""
}

// CheckCodeBundle refuses spec when the code bundle its container args
// name lies in this manager's storage and does not exist there: the task
// could not load its code. what says where the spec comes from (a request
// field, a deployed task) and again what the user does once the client
// cache is gone, for the message. The error wraps errs.ErrPrecondition.
func (s *Service) CheckCodeBundle(ctx context.Context, spec *task.TaskSpec, what, again string) error {
	uri, option := codeBundle(spec.GetTaskTemplate())
	if uri == "" {
		return nil
	}
	key, err := s.blobs.Key(uri)
	if err != nil {
		return nil // not in our storage: nothing to check it against
	}
	ok, err := s.blobs.Exists(ctx, key)
	switch {
	case errors.Is(err, errs.ErrInvalid):
		return nil // not a key this store holds, so not one it lost
	case err != nil:
		return err
	case ok:
		return nil
	}
	// `flyte delete local-cache` removes the SDK's cache directory:
	// ~/.flyte/local-cache, or local-cache beside the config file in use.
	return fmt.Errorf("%s names the code bundle %s (%s), which does not exist in this manager's storage "+
		"(was its data directory deleted, or its storage reset, after the bundle was uploaded?). "+
		"The flyte SDK remembers the bundles it uploaded for a day in its client cache, .flyte/local-cache/cache.db "+
		"(in ~/.flyte or beside your config file), and does not upload them again: "+
		"delete that cache (`flyte delete local-cache`) and %s: %w",
		what, uri, option, again, errs.ErrPrecondition)
}
