package app

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/errs"
)

// Running reports whether the app exists and is not stopped: what an app's
// credential needs to stay valid (internal/appcred), so deleting or
// stopping an app revokes its replicas' access at once.
func (s *Store) Running(ctx context.Context, k Key) (bool, error) {
	r, err := s.Get(ctx, k)
	if errors.Is(err, errs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var spec pb.Spec
	if err := proto.Unmarshal(r.Spec, &spec); err != nil {
		return false, nil // unreadable: it cannot run either
	}
	return spec.GetDesiredState() != pb.Spec_DESIRED_STATE_STOPPED, nil
}
