package actions

import (
	"context"

	"connectrpc.com/connect"

	actionspb "fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/ident"
)

// Signal gives a waiting condition action its value, as RunService's
// SignalEvent does, with the value already a literal. signalled_by is the
// authenticated caller (none with auth off), never the request's field:
// nothing vouches for that.
func (a *actionsService) Signal(ctx context.Context, req *connect.Request[actionspb.SignalRequest]) (*connect.Response[actionspb.SignalResponse], error) {
	key, err := ident.Action("action_id", req.Msg.GetActionId())
	if err != nil {
		return nil, err
	}
	parent := req.Msg.GetParentActionName()
	if err := ident.OptionalActionName("parent_action_name", parent); err != nil {
		return nil, err
	}
	if err := a.s.state.Signal(ctx, key, parent, req.Msg.GetValue(), authn.Subject(ctx)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&actionspb.SignalResponse{}), nil
}
