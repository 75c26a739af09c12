package ident

import (
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// Trigger converts a TriggerName: a trigger is named within its task.
func Trigger(field string, n *common.TriggerName) (store.TriggerKey, error) {
	if n == nil {
		return store.TriggerKey{}, errs.Invalidf("%s is required", field)
	}
	if err := firstErr(
		part(field+".org", n.GetOrg(), 63, segment, true),
		part(field+".project", n.GetProject(), 63, segment, false),
		part(field+".domain", n.GetDomain(), 63, segment, false),
		part(field+".task_name", n.GetTaskName(), 255, dotted, false),
		part(field+".name", n.GetName(), 255, dotted, false),
	); err != nil {
		return store.TriggerKey{}, err
	}
	return store.TriggerKey{Org: Org(n.GetOrg()), Project: n.GetProject(), Domain: n.GetDomain(), TaskName: n.GetTaskName(), Name: n.GetName()}, nil
}

// TriggerProto is the wire form of a trigger key.
func TriggerProto(k store.TriggerKey) *common.TriggerName {
	return &common.TriggerName{Org: k.Org, Project: k.Project, Domain: k.Domain, TaskName: k.TaskName, Name: k.Name}
}
