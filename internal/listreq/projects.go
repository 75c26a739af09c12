package listreq

import (
	"strconv"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// ListProjectsRequest.filters is a string in the admin filter grammar:
// terms joined by "+", each "<function>(<field>,<value>)", where value_in
// and value_not_in take values separated by ";". The SDK sends
// "eq(state, 0)"; the official console "value_in(state,0;1;2)".

// projectFuncs maps the grammar's functions to text operators.
var projectFuncs = map[string]store.TextOp{
	"eq": store.TextEq, "ne": store.TextNe, "gt": store.TextGt, "gte": store.TextGte,
	"lt": store.TextLt, "lte": store.TextLte, "contains": store.TextContains,
	"value_in": store.TextIn, "value_not_in": store.TextNotIn,
}

// projectColumns maps filter fields to the store's columns: a project's id
// is its identity (the store's name), its name a display name.
var projectColumns = map[string]string{
	"id": "name", "identifier": "name", "name": "display_name", "description": "description",
}

const projectGrammar = "<function>(<field>,<value>) joined by '+'; functions eq, ne, gt, gte, lt, lte, contains, value_in, value_not_in (values separated by ';'); fields state, id, name, description"

// ParseProjects turns a ListProjectsRequest into a store filter and page.
// Projects are always listed by name: sort keys name and created_at (the
// SDK's default) are accepted and both served in name order.
func ParseProjects(req *project.ListProjectsRequest) (store.ProjectFilter, store.Page, error) {
	f := store.ProjectFilter{Org: req.GetOrg()}
	switch key := req.GetSortBy().GetKey(); key {
	case "", "name", "created_at":
	default:
		return store.ProjectFilter{}, store.Page{}, errs.Invalidf("cannot sort projects by %q (supported: name)", key)
	}
	var states valueSet[store.ProjectState]
	for term := range strings.SplitSeq(req.GetFilters(), "+") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		fn, field, values, err := splitTerm(term)
		if err != nil {
			return store.ProjectFilter{}, store.Page{}, err
		}
		op := projectFuncs[fn]
		if field == "state" {
			if err := states.andOrdered(term, op, values); err != nil {
				return store.ProjectFilter{}, store.Page{}, err
			}
			continue
		}
		f.Text = append(f.Text, store.TextCond{Column: projectColumns[field], Op: op, Values: values})
	}
	if states.set != nil {
		f.States = states.list(store.NoProjectState)
	}
	return f, Page(req.GetLimit(), req.GetToken()), nil
}

// splitTerm reads one "<function>(<field>,<value>)" term; the function and
// field are checked, and the arity of the values.
func splitTerm(term string) (fn, field string, values []string, err error) {
	bad := func(why string) error {
		return errs.Invalidf("filters: %q %s (expected %s)", term, why, projectGrammar)
	}
	name, rest, ok := strings.Cut(term, "(")
	if !ok || !strings.HasSuffix(rest, ")") {
		return "", "", nil, bad("is not a function call")
	}
	fn = strings.ToLower(strings.TrimSpace(name))
	if _, known := projectFuncs[fn]; !known {
		return "", "", nil, bad("uses an unknown function " + strconv.Quote(fn))
	}
	field, value, ok := strings.Cut(strings.TrimSuffix(rest, ")"), ",")
	if !ok {
		return "", "", nil, bad("has no value")
	}
	field = strings.ToLower(strings.TrimSpace(field))
	if _, known := projectColumns[field]; !known && field != "state" {
		return "", "", nil, bad("names an unknown field " + strconv.Quote(field))
	}
	if fn == "value_in" || fn == "value_not_in" {
		for v := range strings.SplitSeq(value, ";") {
			if v = unquote(v); v != "" {
				values = append(values, v)
			}
		}
	} else if v := unquote(value); v != "" {
		values = []string{v}
	}
	if len(values) == 0 {
		return "", "", nil, bad("has no value")
	}
	if field == "state" && fn == "contains" {
		return "", "", nil, bad("cannot use contains on state")
	}
	return fn, field, values, nil
}

func unquote(v string) string { return strings.Trim(strings.TrimSpace(v), `"'`) }

// andOrdered narrows the set of states by one condition; comparisons are
// by state number.
func (s *valueSet[T]) andOrdered(term string, op store.TextOp, values []string) error {
	var states []T
	for _, v := range values {
		st, err := parseProjectState(v)
		if err != nil {
			return errs.Invalidf("filters: %q: %v", term, err)
		}
		states = append(states, T(st))
	}
	names := project.ProjectState_name
	switch op {
	case store.TextEq, store.TextIn:
		s.and(common.Filter_VALUE_IN, states, names)
	case store.TextNe, store.TextNotIn:
		s.and(common.Filter_VALUE_NOT_IN, states, names)
	default:
		var keep []T
		for n := range names {
			st, bound := T(n), states[0]
			if op == store.TextGt && st > bound || op == store.TextGte && st >= bound ||
				op == store.TextLt && st < bound || op == store.TextLte && st <= bound {
				keep = append(keep, st)
			}
		}
		s.and(common.Filter_VALUE_IN, keep, names)
	}
	return nil
}

// parseProjectState reads a state as its number or (short) enum name.
func parseProjectState(value string) (store.ProjectState, error) {
	if n, err := strconv.ParseInt(value, 10, 32); err == nil {
		if _, known := project.ProjectState_name[int32(n)]; known {
			return store.ProjectState(n), nil
		}
	}
	upper := strings.ToUpper(value)
	for _, name := range []string{upper, "PROJECT_STATE_" + upper} {
		if n, known := project.ProjectState_value[name]; known {
			return store.ProjectState(n), nil
		}
	}
	return 0, errs.Invalidf("%q is not a project state (e.g. 0, 1, ACTIVE, ARCHIVED)", value)
}
