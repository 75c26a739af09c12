package runstate

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/trigger"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// triggered is what a run made by a trigger records once it exists.
type triggered struct {
	trigger   *store.Trigger
	scheduled *time.Time // the firing's scheduled time; nil for a run by name
}

// fromTrigger rewrites a CreateRun naming a trigger into one naming the
// trigger's task version: the trigger's inputs stand when the request
// carries none, its run spec is the floor the request's overrides go on
// (the SDK merges keyword overrides into the inputs itself), and a
// scheduled firing gets its kickoff-time input as a datetime literal.
func (s *Service) fromTrigger(ctx context.Context, run store.RunKey, req *workflow.CreateRunRequest) (*workflow.CreateRunRequest, *triggered, error) {
	k, err := ident.Trigger("trigger_name", req.GetTriggerName())
	if err != nil {
		return nil, nil, err
	}
	if k.Org != run.Org || k.Project != run.Project || k.Domain != run.Domain {
		return nil, nil, errs.Invalidf("trigger_name names project %s, domain %s, but the run is in project %s, domain %s",
			k.Project, k.Domain, run.Project, run.Domain)
	}
	t, err := s.store.Triggers.Get(ctx, k)
	if err != nil {
		return nil, nil, err
	}
	spec, automation := &trigger.TriggerSpec{}, &task.TriggerAutomationSpec{}
	if err := proto.Unmarshal(t.Spec, spec); err != nil {
		return nil, nil, fmt.Errorf("decode trigger %s: %w", k, err)
	}
	if err := proto.Unmarshal(t.AutomationSpec, automation); err != nil {
		return nil, nil, fmt.Errorf("decode trigger %s: %w", k, err)
	}
	scheduled := req.GetSource() == workflow.RunSource_RUN_SOURCE_SCHEDULE_TRIGGER
	if scheduled && !t.Active {
		return nil, nil, fmt.Errorf("trigger %q of task %s is not active: %w", k.Name, k.TaskName, errs.ErrPrecondition)
	}
	out := proto.Clone(req).(*workflow.CreateRunRequest)
	out.Task = &workflow.CreateRunRequest_TaskId{TaskId: &task.TaskIdentifier{
		Org: k.Org, Project: k.Project, Domain: k.Domain, Name: k.TaskName, Version: t.TaskVersion,
	}}
	if out.GetInputWrapper() == nil {
		switch in := spec.GetInputWrapper().(type) {
		case *trigger.TriggerSpec_Inputs:
			out.InputWrapper = &workflow.CreateRunRequest_Inputs{Inputs: in.Inputs}
		case *trigger.TriggerSpec_OffloadedInputData:
			out.InputWrapper = &workflow.CreateRunRequest_OffloadedInputData{OffloadedInputData: in.OffloadedInputData}
		}
	}
	if out.GetRunStartTime() == nil {
		out.RunStartTime = timestamppb.New(time.Now())
	}
	floor := proto.Clone(spec.GetRunSpec()).(*task.RunSpec)
	if floor == nil {
		floor = &task.RunSpec{}
	}
	if req.GetRunSpec() != nil {
		proto.Merge(floor, req.GetRunSpec())
	}
	out.RunSpec = floor
	info := &triggered{trigger: t}
	if scheduled {
		at := out.GetRunStartTime().AsTime().UTC()
		info.scheduled = &at
		if arg := automation.GetSchedule().GetKickoffTimeInputArg(); arg != "" {
			if err := s.setKickoff(ctx, out, arg, out.GetRunStartTime()); err != nil {
				return nil, nil, err
			}
		}
	}
	return out, info, nil
}

// setKickoff makes req's inputs inline with the literal arg set to at (the
// SDK's runtime fills it from run_start_time too; the literal shows the
// value in the run's inputs).
func (s *Service) setKickoff(ctx context.Context, req *workflow.CreateRunRequest, arg string, at *timestamppb.Timestamp) error {
	inputs := req.GetInputs()
	if off := req.GetOffloadedInputData(); off != nil {
		id := req.GetTaskId()
		key, err := s.offloadedInputs("trigger inputs", off.GetUri(), store.RunKey{Org: id.GetOrg(), Project: id.GetProject(), Domain: id.GetDomain()})
		if err != nil {
			return err
		}
		raw, err := s.blobs.Get(ctx, path.Join(key, runlayout.InputsFile))
		if errors.Is(err, errs.ErrNotFound) {
			return fmt.Errorf("the trigger's inputs at %s are gone; deploy the trigger again: %w", off.GetUri(), errs.ErrPrecondition)
		}
		if err != nil {
			return err
		}
		inputs = &task.Inputs{}
		if err := proto.Unmarshal(raw, inputs); err != nil {
			return fmt.Errorf("decode the trigger's inputs at %s: %w", off.GetUri(), err)
		}
	} else if inputs != nil {
		inputs = proto.Clone(inputs).(*task.Inputs)
	} else {
		inputs = &task.Inputs{}
	}
	lit := &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_Datetime{Datetime: at}},
	}}}}
	found := false
	for _, nl := range inputs.GetLiterals() {
		if nl.GetName() == arg {
			nl.Value, found = lit, true
		}
	}
	if !found {
		inputs.Literals = append(inputs.Literals, &task.NamedLiteral{Name: arg, Value: lit})
	}
	req.InputWrapper = &workflow.CreateRunRequest_Inputs{Inputs: inputs}
	return nil
}

// recordTriggered records the trigger that made run. The run exists by
// now: a failure here is logged, not returned (a scheduled firing records
// again when it is retried).
func (s *Service) recordTriggered(ctx context.Context, run store.RunKey, info *triggered) {
	if err := s.store.Triggers.RecordRun(ctx, info.trigger, run, info.scheduled); err != nil {
		s.log.WarnContext(ctx, "recording the trigger of a run", "run", run.RunName, "trigger", info.trigger.TriggerKey.String(), "err", err)
	}
}

// withTriggers fills, in the metadata of the runs a trigger made, which
// trigger (and revision), its automation, and the source SCHEDULE_TRIGGER
// for a scheduled firing. mds are the runs' root metadata, by run.
func (s *Service) withTriggers(ctx context.Context, mds map[store.RunKey]*workflow.ActionMetadata) error {
	keys := make([]store.RunKey, 0, len(mds))
	for k := range mds {
		keys = append(keys, k)
	}
	made, err := s.store.Triggers.RunTriggers(ctx, keys)
	if err != nil {
		return err
	}
	for k, rt := range made {
		md := mds[k]
		if md == nil {
			continue
		}
		md.TriggerId = &common.TriggerIdentifier{Name: ident.TriggerProto(rt.Trigger), Revision: uint64(rt.Revision)}
		md.TriggerName = rt.Trigger.Name
		automation := &task.TriggerAutomationSpec{}
		if proto.Unmarshal(rt.AutomationSpec, automation) == nil {
			md.TriggerType = automation
		}
		if rt.ScheduledAt != nil {
			md.Source = workflow.RunSource_RUN_SOURCE_SCHEDULE_TRIGGER
		}
	}
	return nil
}
