package trigger

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/trigger"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// The SDK's bounds on a trigger's description.
const maxDescription = 255

func marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// automationType is the stored type of an automation spec: NONE for a
// trigger without one.
func automationType(a *task.TriggerAutomationSpec) string {
	if a.GetType() == task.TriggerAutomationSpecType_TYPE_UNSPECIFIED {
		return store.TriggerTypeNone
	}
	return a.GetType().String()
}

// row builds the stored form of a trigger deployed with spec and automation.
func row(k store.TriggerKey, spec *trigger.TriggerSpec, automation *task.TriggerAutomationSpec, by string) (store.Trigger, error) {
	if len(spec.GetDescription()) > maxDescription {
		return store.Trigger{}, errs.Invalidf("trigger %q: description is longer than %d characters", k.Name, maxDescription)
	}
	if automation == nil {
		automation = &task.TriggerAutomationSpec{Type: task.TriggerAutomationSpecType_TYPE_NONE}
	}
	spec = inputsFile(spec)
	rawSpec, err := marshal(spec)
	if err != nil {
		return store.Trigger{}, errs.Invalidf("trigger %q: spec cannot be serialized: %v", k.Name, err)
	}
	rawAuto, err := marshal(automation)
	if err != nil {
		return store.Trigger{}, errs.Invalidf("trigger %q: automation_spec cannot be serialized: %v", k.Name, err)
	}
	return store.Trigger{
		TriggerKey:     k,
		TaskVersion:    spec.GetTaskVersion(),
		Active:         spec.GetActive(),
		AutomationType: automationType(automation),
		Spec:           rawSpec,
		AutomationSpec: rawAuto,
		Description:    spec.GetDescription(),
		DeployedBy:     by,
	}, nil
}

// fromTaskTrigger is the trigger spec of a trigger deployed with its task.
func fromTaskTrigger(version string, t *task.TaskTrigger) *trigger.TriggerSpec {
	ts := t.GetSpec()
	spec := &trigger.TriggerSpec{
		Active:      ts.GetActive(),
		RunSpec:     ts.GetRunSpec(),
		TaskVersion: version,
		Description: ts.GetDescription(),
	}
	switch in := ts.GetInputWrapper().(type) {
	case *task.TaskTriggerSpec_Inputs:
		spec.InputWrapper = &trigger.TriggerSpec_Inputs{Inputs: in.Inputs}
	case *task.TaskTriggerSpec_OffloadedInputData:
		spec.InputWrapper = &trigger.TriggerSpec_OffloadedInputData{OffloadedInputData: in.OffloadedInputData}
	}
	return spec
}

// inputsFile makes a spec's offloaded inputs name their file: UploadInputs
// answers with the directory, CreateRun takes either, and the SDK reads a
// trigger's inputs (to merge overrides into them) from the URI as a file.
func inputsFile(spec *trigger.TriggerSpec) *trigger.TriggerSpec {
	off := spec.GetOffloadedInputData()
	if off == nil || off.GetUri() == "" || strings.HasSuffix(off.GetUri(), "/"+runlayout.InputsFile) {
		return spec
	}
	spec = proto.Clone(spec).(*trigger.TriggerSpec)
	spec.GetOffloadedInputData().Uri = strings.TrimRight(off.GetUri(), "/") + "/" + runlayout.InputsFile
	return spec
}

// decoded is a stored trigger with its protos.
type decoded struct {
	row        *store.Trigger
	spec       *trigger.TriggerSpec
	automation *task.TriggerAutomationSpec
}

func decode(t *store.Trigger) (*decoded, error) {
	d := &decoded{row: t, spec: &trigger.TriggerSpec{}, automation: &task.TriggerAutomationSpec{}}
	if err := proto.Unmarshal(t.Spec, d.spec); err != nil {
		return nil, fmt.Errorf("decode the spec of trigger %s: %w", t.TriggerKey, err)
	}
	if err := proto.Unmarshal(t.AutomationSpec, d.automation); err != nil {
		return nil, fmt.Errorf("decode the automation of trigger %s: %w", t.TriggerKey, err)
	}
	// The stored spec is as deployed; active moves with UpdateTriggers.
	d.spec.Active = t.Active
	return d, nil
}

func identity(subject string) *common.EnrichedIdentity {
	if subject == "" {
		return nil
	}
	return &common.EnrichedIdentity{Principal: &common.EnrichedIdentity_User{User: &common.User{
		Id: &common.UserIdentifier{Subject: subject},
	}}}
}

func (d *decoded) id() *common.TriggerIdentifier {
	return &common.TriggerIdentifier{Name: ident.TriggerProto(d.row.TriggerKey), Revision: uint64(d.row.Revision)}
}

func (d *decoded) metadata() *trigger.TriggerMetadata {
	return &trigger.TriggerMetadata{DeployedBy: identity(d.row.DeployedBy), UpdatedBy: identity(d.row.UpdatedBy)}
}

func (d *decoded) status() *trigger.TriggerStatus {
	t := d.row
	st := &trigger.TriggerStatus{DeployedAt: timestamppb.New(t.DeployedAt), UpdatedAt: timestamppb.New(t.UpdatedAt)}
	if t.TriggeredAt != nil {
		st.TriggeredAt = timestamppb.New(*t.TriggeredAt)
	}
	if t.DeletedAt != nil {
		st.DeletedAt = timestamppb.New(*t.DeletedAt)
	}
	return st
}

// details is GetTriggerDetails' view.
func (d *decoded) details() *trigger.TriggerDetails {
	out := &trigger.TriggerDetails{
		Id:             d.id(),
		Metadata:       d.metadata(),
		Spec:           d.spec,
		Status:         d.status(),
		AutomationSpec: d.automation,
	}
	if d.row.Description != "" {
		desc := d.row.Description
		out.Description = &desc
	}
	return out
}

// summary is ListTriggers' view.
func (d *decoded) summary() *trigger.Trigger {
	return &trigger.Trigger{
		Id:             d.id(),
		Metadata:       d.metadata(),
		Status:         d.status(),
		Active:         d.row.Active,
		AutomationSpec: d.automation,
	}
}
