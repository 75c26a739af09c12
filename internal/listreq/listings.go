package listreq

import (
	"slices"
	"time"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

var (
	eq       = []common.Filter_Function{common.Filter_EQUAL}
	setFuncs = []common.Filter_Function{common.Filter_EQUAL, common.Filter_NOT_EQUAL, common.Filter_VALUE_IN, common.Filter_VALUE_NOT_IN}
	cmpFuncs = []common.Filter_Function{common.Filter_GREATER_THAN, common.Filter_GREATER_THAN_OR_EQUAL, common.Filter_LESS_THAN, common.Filter_LESS_THAN_OR_EQUAL}
	// nameFuncs are for names: exact, or a part of it (the official
	// console's search boxes send CONTAINS_CASE_INSENSITIVE).
	nameFuncs = []common.Filter_Function{common.Filter_EQUAL, common.Filter_CONTAINS, common.Filter_CONTAINS_CASE_INSENSITIVE}
)

// RunsSchema is what ListRuns accepts: the filters `flyte get run` and
// flyte.remote.Run.listall send, where the store can serve them.
var RunsSchema = Schema{
	Listing: "runs",
	Fields: map[string]Field{
		"phase":        {Kind: KindPhase, Funcs: setFuncs},
		"task_name":    {Kind: KindString, Funcs: nameFuncs},
		"task_version": {Kind: KindString, Funcs: eq},
		"trigger_name": {Kind: KindString, Funcs: eq},
		"created_by":   {Kind: KindString, Funcs: eq},
		"created_at":   {Kind: KindTime, Funcs: cmpFuncs},
		"updated_at":   {Unsupported: "filtering runs by updated_at is not supported yet; filter by created_at"},
		"labels.*":     {Unsupported: "filtering by labels is not supported yet"},
	},
	Sorts: []SortKey{{Key: "created_at", Ascending: true, Descending: true}},
}

// ParseRuns turns the ListRequest of ListRuns into a store filter and page.
// The caller sets the scope (Org, Project, Domain) from ListRunsRequest.
//
//	phase        EQUAL, NOT_EQUAL, VALUE_IN, VALUE_NOT_IN  (numbers or names)
//	task_name    EQUAL, CONTAINS, CONTAINS_CASE_INSENSITIVE
//	task_version EQUAL
//	trigger_name EQUAL   (the runs a trigger of the run's task made: the
//	             official console sends it with task_name)
//	created_by   EQUAL   (the subject; `--only-mine` sends UserInfo.subject)
//	created_at   GREATER_THAN(_OR_EQUAL), LESS_THAN(_OR_EQUAL)  (RFC 3339)
//	sort         created_at, either direction; newest first by default
func ParseRuns(req *common.ListRequest) (store.RunFilter, store.Page, error) {
	q, err := Parse(req, RunsSchema)
	if err != nil {
		return store.RunFilter{}, store.Page{}, err
	}
	f := store.RunFilter{Ascending: q.Sort.Ascending}
	var phases valueSet[phase.Phase]
	for _, c := range q.Conds {
		switch c.Field {
		case "phase":
			phases.and(c.Func, c.Phases, common.ActionPhase_name)
		case "task_name":
			if sub, ok := substring(c); ok {
				f.TaskNameContains = append(f.TaskNameContains, sub)
			} else {
				err = setOnce(&f.TaskName, c)
			}
		case "task_version":
			err = setOnce(&f.TaskVersion, c)
		case "trigger_name":
			err = setOnce(&f.TriggerName, c)
		case "created_by":
			err = setOnce(&f.CreatedBy, c)
		case "created_at":
			timeBounds(c, &f.CreatedAfter, &f.CreatedBefore)
		}
		if err != nil {
			return store.RunFilter{}, store.Page{}, err
		}
	}
	f.Phases = phases.list(noPhase)
	return f, q.Page, nil
}

// ActionsSchema is what ListActions accepts: the filters
// flyte.remote.Action.listall sends (and action_type).
var ActionsSchema = Schema{
	Listing: "actions",
	Fields: map[string]Field{
		"parent_name": {Kind: KindString, Funcs: eq},
		"phase":       {Kind: KindPhase, Funcs: setFuncs},
		"action_type": {Kind: KindActionType, Funcs: setFuncs},
		"created_at":  {Kind: KindTime, Funcs: cmpFuncs},
		"updated_at":  {Kind: KindTime, Funcs: cmpFuncs},
	},
	Sorts:            []SortKey{{Key: "created_at", Ascending: true}},
	DefaultAscending: true,
}

// ActionQuery is a parsed ListActions request.
type ActionQuery struct {
	Filter store.ActionFilter
	Page   store.Page
}

// ParseActionQuery turns the ListRequest of ListActions into a query,
// oldest first only:
//
//	parent_name  EQUAL: the direct children of that action
//	phase        EQUAL, NOT_EQUAL, VALUE_IN, VALUE_NOT_IN  (numbers or names)
//	action_type  EQUAL, NOT_EQUAL, VALUE_IN, VALUE_NOT_IN  (TASK, TRACE, CONDITION or numbers)
//	created_at, updated_at  GREATER_THAN(_OR_EQUAL), LESS_THAN(_OR_EQUAL)  (RFC 3339)
func ParseActionQuery(req *common.ListRequest) (ActionQuery, error) {
	q, err := Parse(req, ActionsSchema)
	if err != nil {
		return ActionQuery{}, err
	}
	out := ActionQuery{Page: q.Page}
	f := &out.Filter
	var phases valueSet[phase.Phase]
	var types valueSet[store.ActionType]
	for _, c := range q.Conds {
		switch c.Field {
		case "parent_name":
			err = setOnce(&f.Parent, c)
		case "phase":
			phases.and(c.Func, c.Phases, common.ActionPhase_name)
		case "action_type":
			types.and(c.Func, c.Types, workflow.ActionType_name)
		case "created_at":
			timeBounds(c, &f.CreatedAfter, &f.CreatedBefore)
		case "updated_at":
			timeBounds(c, &f.UpdatedAfter, &f.UpdatedBefore)
		}
		if err != nil {
			return ActionQuery{}, err
		}
	}
	f.Phases, f.Types = phases.list(noPhase), types.list(noType)
	if f.Parent != "" {
		if err := ident.ActionName("filters.parent_name", f.Parent); err != nil {
			return ActionQuery{}, err
		}
	}
	return out, nil
}

// TasksSchema is what ListTasks accepts: the SDK's name filters and the
// official console's deployed_by, updated_at and trigger_types. The store
// lists task versions newest first only; an ascending request is accepted
// (the SDK asks for it by default) and reported in TaskQuery.Ascending.
var TasksSchema = Schema{
	Listing: "tasks",
	Fields: map[string]Field{
		"name":          {Kind: KindString, Funcs: nameFuncs},
		"deployed_by":   {Kind: KindString, Funcs: []common.Filter_Function{common.Filter_EQUAL, common.Filter_VALUE_IN}},
		"created_at":    {Kind: KindTime, Funcs: cmpFuncs},
		"updated_at":    {Kind: KindTime, Funcs: cmpFuncs},
		"trigger_types": {Kind: KindTriggerType, Funcs: setFuncs},
	},
	Sorts: []SortKey{{Key: "created_at", Ascending: true, Descending: true}},
}

// VersionsSchema is what ListVersions accepts: no filters.
var VersionsSchema = Schema{
	Listing: "task versions",
	Sorts:   []SortKey{{Key: "created_at", Ascending: true, Descending: true}},
}

// TaskQuery is a parsed ListTasks or ListVersions request. The caller sets
// the scope (Org, Project, Domain) of Filter.
type TaskQuery struct {
	// Filter.Name is set by a name EQUAL filter (the SDK's
	// Task.get(auto_version="latest") and `flyte get task <name>`).
	Filter store.TaskFilter
	// MatchNone is set when the filters together can match no task (e.g.
	// two deployed_by filters with no subject in common, or a trigger type
	// no task has): the caller answers an empty page without a query.
	MatchNone bool
	Page      store.Page
	// Ascending is the order asked for. The store serves newest first only,
	// so callers list newest first either way until it can.
	Ascending bool
}

// ParseTasks turns the ListRequest of ListTasks into a query:
//
//	name           EQUAL, CONTAINS, CONTAINS_CASE_INSENSITIVE  (the SDK lists an
//	               environment's tasks with CONTAINS "<env>.")
//	deployed_by    EQUAL, VALUE_IN  (the deployer's subject)
//	created_at, updated_at  GREATER_THAN(_OR_EQUAL), LESS_THAN(_OR_EQUAL)  (RFC 3339)
//	trigger_types  EQUAL, NOT_EQUAL, VALUE_IN, VALUE_NOT_IN  (NONE, SCHEDULE, ARTIFACT or numbers)
//
// A task version is immutable (redeploying it with the same spec changes
// nothing), so its updated_at is its deploy time, created_at. A version's
// trigger types are those of the live triggers pinned to it, NONE when it
// has none: a trigger_types filter keeps the versions with one of the
// types it admits.
func ParseTasks(req *common.ListRequest) (TaskQuery, error) {
	q, err := Parse(req, TasksSchema)
	if err != nil {
		return TaskQuery{}, err
	}
	out := TaskQuery{Page: q.Page, Ascending: q.Sort.Ascending}
	f := &out.Filter
	var deployers []string // nil: any subject
	var triggers valueSet[task.TriggerAutomationSpecType]
	for _, c := range q.Conds {
		switch c.Field {
		case "name":
			if sub, ok := substring(c); ok {
				f.NameContains = append(f.NameContains, sub)
			} else if err := setOnce(&f.Name, c); err != nil {
				return TaskQuery{}, err
			}
		case "deployed_by":
			deployers = intersect(deployers, c.Values)
		case "created_at", "updated_at":
			timeBounds(c, &f.DeployedAfter, &f.DeployedBefore)
		case "trigger_types":
			triggers.and(c.Func, c.TriggerTypes, task.TriggerAutomationSpecType_name)
		}
	}
	if deployers != nil {
		f.DeployedBy = deployers
		out.MatchNone = len(deployers) == 0
	}
	if triggers.set != nil {
		// UNSPECIFIED is read as NONE: only the named types count.
		delete(triggers.set, task.TriggerAutomationSpecType_TYPE_UNSPECIFIED)
		f.TriggerTypes = []string{}
		for t, ok := range triggers.set {
			if ok {
				f.TriggerTypes = append(f.TriggerTypes, t.String())
			}
		}
		slices.Sort(f.TriggerTypes)
		out.MatchNone = len(f.TriggerTypes) == 0
	}
	return out, nil
}

// intersect narrows a set of strings (nil: any) to those also in vals,
// sorted and without duplicates; an empty, non-nil result matches nothing.
func intersect(set, vals []string) []string {
	next := make([]string, 0, len(vals))
	for _, v := range vals {
		if (set == nil || slices.Contains(set, v)) && !slices.Contains(next, v) {
			next = append(next, v)
		}
	}
	slices.Sort(next)
	return next
}

// ParseVersions turns the ListRequest of ListVersions into a query; the
// caller sets the task name.
func ParseVersions(req *common.ListRequest) (TaskQuery, error) {
	q, err := Parse(req, VersionsSchema)
	if err != nil {
		return TaskQuery{}, err
	}
	return TaskQuery{Page: q.Page, Ascending: q.Sort.Ascending}, nil
}

// substring is the store condition of a CONTAINS filter.
func substring(c Cond) (store.Substring, bool) {
	switch c.Func {
	case common.Filter_CONTAINS:
		return store.Substring{Text: c.Values[0]}, true
	case common.Filter_CONTAINS_CASE_INSENSITIVE:
		return store.Substring{Text: c.Values[0], IgnoreCase: true}, true
	}
	return store.Substring{}, false
}

// setOnce stores an EQUAL value; a second, different value for the same
// field can match nothing and is rejected as a mistake.
func setOnce(dst *string, c Cond) error {
	v := c.Values[0]
	if *dst != "" && *dst != v {
		return errs.Invalidf("conflicting filters on %q: %q and %q", c.Field, *dst, v)
	}
	*dst = v
	return nil
}

// noPhase is a phase no action has: the store's filter for "no phase
// matches" (an empty Phases list means any phase).
const noPhase = phase.Phase(-1)

// noType is the action type filter that matches nothing.
const noType = store.ActionType(-1)

// valueSet intersects conditions on an enum field; nil means "any value".
type valueSet[T ~int32] struct {
	set map[T]bool
}

// and narrows s by one condition whose parsed values are vals, over the
// enum's names (every value it has).
func (s *valueSet[T]) and(fn common.Filter_Function, vals []T, names map[int32]string) {
	next := map[T]bool{}
	switch fn {
	case common.Filter_EQUAL, common.Filter_VALUE_IN:
		for _, v := range vals {
			next[v] = true
		}
	default: // NOT_EQUAL, VALUE_NOT_IN
		for n := range names {
			if !slices.Contains(vals, T(n)) {
				next[T(n)] = true
			}
		}
	}
	if s.set != nil {
		for v := range next {
			if !s.set[v] {
				delete(next, v)
			}
		}
	}
	s.set = next
}

// list is the set for the store: nil for any value, [none] when no value
// can match.
func (s *valueSet[T]) list(none T) []T {
	if s.set == nil {
		return nil
	}
	if len(s.set) == 0 {
		return []T{none}
	}
	out := make([]T, 0, len(s.set))
	for v := range s.set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// timeBounds narrows [after, before) by one comparison. Stored times have
// microsecond precision, so each bound is moved to the microsecond that
// gives exactly the rows the comparison asks for.
func timeBounds(c Cond, after, before *time.Time) {
	t := c.Times[0]
	var a, b time.Time
	switch c.Func {
	case common.Filter_GREATER_THAN:
		a = t.Truncate(time.Microsecond).Add(time.Microsecond)
	case common.Filter_GREATER_THAN_OR_EQUAL:
		a = ceilMicro(t)
	case common.Filter_LESS_THAN:
		b = ceilMicro(t)
	case common.Filter_LESS_THAN_OR_EQUAL:
		b = t.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	if !a.IsZero() && (after.IsZero() || a.After(*after)) {
		*after = a
	}
	if !b.IsZero() && (before.IsZero() || b.Before(*before)) {
		*before = b
	}
}

func ceilMicro(t time.Time) time.Time {
	u := t.Truncate(time.Microsecond)
	if u.Before(t) {
		u = u.Add(time.Microsecond)
	}
	return u
}
