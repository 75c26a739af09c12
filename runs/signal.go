package runs

import (
	"context"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
)

// SignalEvent gives a waiting condition action its value (flyte signal
// condition, remote.Condition.signal, the console's signal form). The run
// state checks the value against the condition's declared type: a wrong
// one is InvalidArgument and changes nothing.
func (s *RunService) SignalEvent(ctx context.Context, req *connect.Request[workflow.SignalEventRequest]) (*connect.Response[workflow.SignalEventResponse], error) {
	key, err := ident.Action("action_id", req.Msg.GetActionId())
	if err != nil {
		return nil, err
	}
	parent := req.Msg.GetParentActionName()
	if err := ident.OptionalActionName("parent_action_name", parent); err != nil {
		return nil, err
	}
	v, err := payloadLiteral(req.Msg.GetPayload())
	if err != nil {
		return nil, err
	}
	if err := s.state.Signal(ctx, key, parent, v, authn.Subject(ctx)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.SignalEventResponse{}), nil
}

// payloadLiteral is a signal's payload as the primitive literal a
// condition's waiting task receives.
func payloadLiteral(p *workflow.EventPayload) (*core.Literal, error) {
	prim := &core.Primitive{}
	switch v := p.GetValue().(type) {
	case *workflow.EventPayload_BoolValue:
		prim.Value = &core.Primitive_Boolean{Boolean: v.BoolValue}
	case *workflow.EventPayload_IntValue:
		prim.Value = &core.Primitive_Integer{Integer: v.IntValue}
	case *workflow.EventPayload_FloatValue:
		prim.Value = &core.Primitive_FloatValue{FloatValue: v.FloatValue}
	case *workflow.EventPayload_StringValue:
		prim.Value = &core.Primitive_StringValue{StringValue: v.StringValue}
	default:
		return nil, errs.Invalidf("payload: a bool_value, int_value, float_value or string_value is required")
	}
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: prim}}}}, nil
}
