// Package ident converts flyteidl2 identifiers to store keys and back, and
// validates them in one place. Every part of an identifier ends up in a
// storage path or a SQL key, so each must be one safe path segment; errors
// name the request field so a user can act on them.
package ident

import (
	"regexp"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// AnonymousSubject is who acts when the manager runs without
// authentication: runs record it as their creator and IdentityService
// answers it, so "only mine" filters (flyte get run --only-mine) work.
const AnonymousSubject = "anonymous"

// LocalOrg is the org a task process runs with when its action's org is
// empty: the SDK's runtime refuses an empty _U_ORG_NAME and then names that
// org in every identifier it sends back. Identifiers arriving with LocalOrg
// therefore mean the empty org, which is what SDKs pointed at localhost use.
const LocalOrg = "local"

// Org normalizes an incoming org (see LocalOrg).
func Org(org string) string {
	if org == LocalOrg {
		return ""
	}
	return org
}

var (
	segment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	// Task names are "<environment>.<function>"; versions may carry dots and '+'.
	dotted = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]*$`)
)

// part validates one identifier part. Org is the only part that may be
// empty: SDKs pointed at localhost send no org at all.
func part(field, v string, max int, re *regexp.Regexp, optional bool) error {
	switch {
	case v == "" && optional:
		return nil
	case v == "":
		return errs.Invalidf("%s is required", field)
	case len(v) > max:
		return errs.Invalidf("%s %q is longer than %d characters", field, v, max)
	case !re.MatchString(v):
		return errs.Invalidf("%s %q may only contain letters, digits, '-' and '_'%s", field, v, extra(re))
	}
	return nil
}

func extra(re *regexp.Regexp) string {
	if re == dotted {
		return ", '.' and '+'"
	}
	return ""
}

// Project validates a project scope (org, project, domain).
func Project(field string, p *common.ProjectIdentifier) (org, project, domain string, err error) {
	if p == nil {
		return "", "", "", errs.Invalidf("%s is required", field)
	}
	if err := firstErr(
		part(field+".organization", p.GetOrganization(), 63, segment, true),
		part(field+".name", p.GetName(), 63, segment, false),
		part(field+".domain", p.GetDomain(), 63, segment, false),
	); err != nil {
		return "", "", "", err
	}
	return Org(p.GetOrganization()), p.GetName(), p.GetDomain(), nil
}

// Run converts a RunIdentifier.
func Run(field string, r *common.RunIdentifier) (store.RunKey, error) {
	if r == nil {
		return store.RunKey{}, errs.Invalidf("%s is required", field)
	}
	if err := firstErr(
		part(field+".org", r.GetOrg(), 63, segment, true),
		part(field+".project", r.GetProject(), 63, segment, false),
		part(field+".domain", r.GetDomain(), 63, segment, false),
		part(field+".name", r.GetName(), 30, segment, false),
	); err != nil {
		return store.RunKey{}, err
	}
	return store.RunKey{Org: Org(r.GetOrg()), Project: r.GetProject(), Domain: r.GetDomain(), RunName: r.GetName()}, nil
}

// Action converts an ActionIdentifier.
func Action(field string, a *common.ActionIdentifier) (store.ActionKey, error) {
	if a == nil {
		return store.ActionKey{}, errs.Invalidf("%s is required", field)
	}
	run, err := Run(field+".run", a.GetRun())
	if err != nil {
		return store.ActionKey{}, err
	}
	if err := part(field+".name", a.GetName(), 30, segment, false); err != nil {
		return store.ActionKey{}, err
	}
	return run.Action(a.GetName()), nil
}

// ActionName validates a bare action name (e.g. a parent's).
func ActionName(field, name string) error { return part(field, name, 30, segment, false) }

// OptionalActionName is ActionName where "" is allowed (a signal's
// parent_action_name).
func OptionalActionName(field, name string) error { return part(field, name, 30, segment, true) }

// Task converts a TaskIdentifier; version is required.
func Task(field string, t *task.TaskIdentifier) (store.TaskID, error) {
	if t == nil {
		return store.TaskID{}, errs.Invalidf("%s is required", field)
	}
	if err := firstErr(
		part(field+".org", t.GetOrg(), 63, segment, true),
		part(field+".project", t.GetProject(), 63, segment, false),
		part(field+".domain", t.GetDomain(), 63, segment, false),
		part(field+".name", t.GetName(), 255, dotted, false),
		part(field+".version", t.GetVersion(), 63, dotted, false),
	); err != nil {
		return store.TaskID{}, err
	}
	return store.TaskID{Org: Org(t.GetOrg()), Project: t.GetProject(), Domain: t.GetDomain(), Name: t.GetName(), Version: t.GetVersion()}, nil
}

func firstErr(es ...error) error {
	for _, e := range es {
		if e != nil {
			return e
		}
	}
	return nil
}

// RunProto is the wire form of a run key.
func RunProto(k store.RunKey) *common.RunIdentifier {
	return &common.RunIdentifier{Org: k.Org, Project: k.Project, Domain: k.Domain, Name: k.RunName}
}

// ActionProto is the wire form of an action key.
func ActionProto(k store.ActionKey) *common.ActionIdentifier {
	return &common.ActionIdentifier{Run: RunProto(k.RunKey), Name: k.Name}
}

// TaskProto is the wire form of a task id.
func TaskProto(t store.TaskID) *task.TaskIdentifier {
	return &task.TaskIdentifier{Org: t.Org, Project: t.Project, Domain: t.Domain, Name: t.Name, Version: t.Version}
}
