// Package listreq turns the list requests of the flyteidl2 APIs
// (common.ListRequest: limit, token, sort, filters) into typed store
// queries, in one place for every List* RPC. Each listing declares what it
// accepts in a Schema: which fields can be filtered (with the value kind and
// the filter functions allowed) and which sort keys and directions it
// serves. Anything outside that is rejected with an InvalidArgument error
// that names the field, function or key, so a caller learns what to change
// instead of getting a silently unfiltered list.
package listreq

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Page sizes of every listing. A larger limit is clamped, not rejected: the
// flyte CLI asks for 100 or 200 rows at a time.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Kind is the type of a filterable field's values.
type Kind int

const (
	// KindString values are compared as sent.
	KindString Kind = iota
	// KindPhase values are action phases: a number ("5"), an enum name
	// ("ACTION_PHASE_SUCCEEDED") or its short form ("succeeded").
	KindPhase
	// KindTime values are RFC 3339 timestamps.
	KindTime
	// KindActionType values are action types: a number ("2"), an enum name
	// ("ACTION_TYPE_TRACE") or its short form ("trace").
	KindActionType
	// KindTriggerType values are trigger automation types: a number ("2"),
	// an enum name ("TYPE_SCHEDULE") or its short form ("schedule"); an
	// empty value and TYPE_UNSPECIFIED both mean TYPE_NONE (no trigger).
	KindTriggerType
)

// Field describes one filterable field of a listing.
type Field struct {
	Kind  Kind
	Funcs []common.Filter_Function // the filter functions accepted on it
	// Unsupported, when set, rejects every filter on the field with this
	// message: for fields the SDK sends that the store cannot filter yet.
	Unsupported string
}

// SortKey is one key a listing can be ordered by.
type SortKey struct {
	Key        string
	Ascending  bool // served oldest/smallest first
	Descending bool // served newest/largest first
}

// Schema is what one listing accepts.
type Schema struct {
	// Listing names the listing in messages ("runs", "tasks").
	Listing string
	// Fields by name; a key "prefix.*" matches every "prefix.<anything>"
	// (e.g. "labels.*" for "labels.team").
	Fields map[string]Field
	// Sorts lists the accepted sort keys; the first is the default.
	Sorts []SortKey
	// DefaultAscending is the direction when the request names no sort.
	DefaultAscending bool
}

// Sort is the order a request asked for, validated against its Schema.
type Sort struct {
	Key       string
	Ascending bool
}

// Cond is one validated filter, with its values parsed by the field's kind.
type Cond struct {
	Field  string
	Func   common.Filter_Function
	Values []string           // as sent (every kind)
	Phases []phase.Phase      // KindPhase
	Times  []time.Time        // KindTime, in UTC
	Types  []store.ActionType // KindActionType
	// TriggerTypes holds KindTriggerType values, UNSPECIFIED read as NONE.
	TriggerTypes []task.TriggerAutomationSpecType
}

// Query is a validated ListRequest: one page, one order and the filters
// (all of which must hold).
type Query struct {
	Page  store.Page
	Sort  Sort
	Conds []Cond
}

// Parse validates req against s. A nil req is the first page in the
// default order, unfiltered.
func Parse(req *common.ListRequest, s Schema) (Query, error) {
	q := Query{Page: Page(req.GetLimit(), req.GetToken())}
	var err error
	if q.Sort, err = parseSort(req, s); err != nil {
		return Query{}, err
	}
	for _, raw := range req.GetRawFilters() {
		if strings.TrimSpace(raw) != "" {
			return Query{}, errs.Invalidf("raw_filters are not supported when listing %s; use filters (field, function, values) instead", s.Listing)
		}
	}
	for i, f := range req.GetFilters() {
		c, err := parseFilter(fmt.Sprintf("filters[%d]", i), f, s)
		if err != nil {
			return Query{}, err
		}
		q.Conds = append(q.Conds, c)
	}
	return q, nil
}

// Page is the store page for a requested limit and token: 0 means
// DefaultLimit and anything above MaxLimit is clamped to it.
func Page(limit uint32, token string) store.Page {
	n := int(limit)
	switch {
	case limit == 0:
		n = DefaultLimit
	case limit > MaxLimit:
		n = MaxLimit
	}
	return store.Page{Limit: n, Token: token}
}

// parseSort picks the order: sort_by_fields if set, else the deprecated
// sort_by (which the SDK still sends), else the schema's default. A sort
// with an empty key keeps the default key and applies its direction.
func parseSort(req *common.ListRequest, s Schema) (Sort, error) {
	def := Sort{Ascending: s.DefaultAscending}
	if len(s.Sorts) > 0 {
		def.Key = s.Sorts[0].Key
	}
	var want *common.Sort
	switch fields := req.GetSortByFields(); {
	case len(fields) > 1:
		return Sort{}, errs.Invalidf("sorting %s by more than one key is not supported; send one entry in sort_by_fields", s.Listing)
	case len(fields) == 1:
		want = fields[0]
	default:
		want = req.GetSortBy()
	}
	if want == nil {
		return def, nil
	}
	key := want.GetKey()
	if key == "" {
		key = def.Key
	}
	asc := want.GetDirection() == common.Sort_ASCENDING
	for _, k := range s.Sorts {
		if k.Key != key {
			continue
		}
		if asc && !k.Ascending || !asc && !k.Descending {
			return Sort{}, errs.Invalidf("%s can only be sorted by %s %s", s.Listing, key, direction(k))
		}
		return Sort{Key: key, Ascending: asc}, nil
	}
	keys := make([]string, len(s.Sorts))
	for i, k := range s.Sorts {
		keys[i] = k.Key
	}
	return Sort{}, errs.Invalidf("cannot sort %s by %q (supported: %s)", s.Listing, key, strings.Join(keys, ", "))
}

func direction(k SortKey) string {
	if k.Ascending {
		return "ascending"
	}
	return "descending"
}

// lookup finds the schema entry for a field name: exact, else "prefix.*".
func (s Schema) lookup(name string) (Field, bool) {
	if f, ok := s.Fields[name]; ok {
		return f, true
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		f, ok := s.Fields[name[:i]+".*"]
		return f, ok
	}
	return Field{}, false
}

func (s Schema) fieldNames() string {
	var names []string
	for name, f := range s.Fields {
		if f.Unsupported == "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func parseFilter(where string, f *common.Filter, s Schema) (Cond, error) {
	name := f.GetField()
	if name == "" {
		return Cond{}, errs.Invalidf("%s.field is required", where)
	}
	field, ok := s.lookup(name)
	if !ok {
		return Cond{}, errs.Invalidf("filter field %q is not supported when listing %s (supported: %s)", name, s.Listing, s.fieldNames())
	}
	if field.Unsupported != "" {
		return Cond{}, errs.Invalidf("%s", field.Unsupported)
	}
	fn := f.GetFunction()
	if !slices.Contains(field.Funcs, fn) {
		return Cond{}, errs.Invalidf("filter function %s is not supported on field %q when listing %s (supported: %s)",
			fn, name, s.Listing, funcNames(field.Funcs))
	}
	values := f.GetValues()
	// The SDK builds single-valued filters as Filter(values=s); Python's
	// protobuf turns a str assigned to a repeated field into its characters,
	// so phase "10" arrives as ["1", "0"]. Put such values back together.
	if fn == common.Filter_EQUAL && len(values) > 1 && allSingleChars(values) {
		values = []string{strings.Join(values, "")}
	}
	if err := checkArity(name, fn, values); err != nil {
		return Cond{}, err
	}
	c := Cond{Field: name, Func: fn, Values: values}
	for _, v := range values {
		switch field.Kind {
		case KindString:
			if v == "" {
				return Cond{}, errs.Invalidf("filter on %q needs a non-empty value", name)
			}
		case KindPhase:
			p, err := ParsePhase(v)
			if err != nil {
				return Cond{}, errs.Invalidf("filter on %q: %v", name, err)
			}
			c.Phases = append(c.Phases, p)
		case KindActionType:
			n, err := parseEnum(v, "an action type", "ACTION_TYPE_", workflow.ActionType_value, workflow.ActionType_name)
			if err != nil {
				return Cond{}, errs.Invalidf("filter on %q: %v (e.g. TASK, ACTION_TYPE_TRACE or 1)", name, err)
			}
			c.Types = append(c.Types, store.ActionType(n))
		case KindTriggerType:
			n, err := parseTriggerType(v)
			if err != nil {
				return Cond{}, errs.Invalidf("filter on %q: %v (e.g. NONE, TYPE_SCHEDULE or 3)", name, err)
			}
			c.TriggerTypes = append(c.TriggerTypes, n)
		case KindTime:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return Cond{}, errs.Invalidf("filter on %q: %q is not an RFC 3339 timestamp (e.g. 2026-01-02T15:04:05Z)", name, v)
			}
			c.Times = append(c.Times, t.UTC())
		}
	}
	return c, nil
}

func allSingleChars(vs []string) bool {
	for _, v := range vs {
		if len(v) != 1 {
			return false
		}
	}
	return true
}

// checkArity enforces how many values each function takes.
func checkArity(name string, fn common.Filter_Function, values []string) error {
	switch fn {
	case common.Filter_VALUE_IN, common.Filter_VALUE_NOT_IN:
		if len(values) == 0 {
			return errs.Invalidf("filter %s on %q needs at least one value", fn, name)
		}
	case common.Filter_EXISTS, common.Filter_NOT_EXISTS:
		if len(values) != 0 {
			return errs.Invalidf("filter %s on %q takes no values", fn, name)
		}
	default:
		if len(values) != 1 {
			return errs.Invalidf("filter %s on %q needs exactly one value, got %d", fn, name, len(values))
		}
	}
	return nil
}

func funcNames(fns []common.Filter_Function) string {
	s := make([]string, len(fns))
	for i, fn := range fns {
		s[i] = fn.String()
	}
	return strings.Join(s, ", ")
}

// ParsePhase reads an action phase as a number ("5"), an enum name
// ("ACTION_PHASE_SUCCEEDED") or its short form ("succeeded"), in any case.
func ParsePhase(v string) (phase.Phase, error) {
	n, err := parseEnum(v, "an action phase", "ACTION_PHASE_", common.ActionPhase_value, common.ActionPhase_name)
	if err != nil {
		return 0, fmt.Errorf("%w (e.g. SUCCEEDED, ACTION_PHASE_RUNNING or 5)", err)
	}
	return phase.Phase(n), nil
}

// parseTriggerType reads a trigger automation type; "" and UNSPECIFIED
// are read as NONE, the type of a task without triggers.
func parseTriggerType(v string) (task.TriggerAutomationSpecType, error) {
	if strings.TrimSpace(v) == "" {
		return task.TriggerAutomationSpecType_TYPE_NONE, nil
	}
	n, err := parseEnum(v, "a trigger type", "TYPE_", task.TriggerAutomationSpecType_value, task.TriggerAutomationSpecType_name)
	if err != nil {
		return 0, err
	}
	if t := task.TriggerAutomationSpecType(n); t != task.TriggerAutomationSpecType_TYPE_UNSPECIFIED {
		return t, nil
	}
	return task.TriggerAutomationSpecType_TYPE_NONE, nil
}

// parseEnum reads a value of a proto enum (what it is, for the error): its
// number, its name, or its name without the prefix, in any case.
func parseEnum(v, what, prefix string, values map[string]int32, names map[int32]string) (int32, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	if n, ok := values[s]; ok {
		return n, nil
	}
	if n, ok := values[prefix+s]; ok {
		return n, nil
	}
	var n int32
	if _, err := fmt.Sscan(s, &n); err == nil && fmt.Sprint(n) == s {
		if _, ok := names[n]; ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%q is not %s", v, what)
}
