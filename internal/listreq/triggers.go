package listreq

import (
	"strconv"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// TriggersSchema is what ListTriggers accepts: the filters of the official
// UI's triggers view.
var TriggersSchema = Schema{
	Listing: "triggers",
	Fields: map[string]Field{
		"name":            {Kind: KindString, Funcs: nameFuncs},
		"task_name":       {Kind: KindString, Funcs: eq},
		"task_version":    {Kind: KindString, Funcs: eq},
		"active":          {Kind: KindString, Funcs: eq},
		"automation_type": {Kind: KindTriggerType, Funcs: setFuncs},
		"deployed_by":     {Kind: KindString, Funcs: []common.Filter_Function{common.Filter_EQUAL, common.Filter_VALUE_IN}},
	},
	// One order is served whatever key is named: active first, then the
	// most recently updated (the reference's default).
	Sorts: []SortKey{
		{Key: "active", Ascending: true, Descending: true},
		{Key: "updated_at", Ascending: true, Descending: true},
	},
}

// ParseTriggers turns the ListRequest of ListTriggers into a store filter
// and page; the caller sets the scope. MatchNone is set when the filters
// together can match no trigger.
//
//	name             EQUAL, CONTAINS, CONTAINS_CASE_INSENSITIVE
//	task_name, task_version  EQUAL
//	active           EQUAL  ("true" or "false")
//	automation_type  EQUAL, NOT_EQUAL, VALUE_IN, VALUE_NOT_IN  (NONE, SCHEDULE, ...)
//	deployed_by      EQUAL, VALUE_IN
func ParseTriggers(req *common.ListRequest) (f store.TriggerFilter, page store.Page, matchNone bool, err error) {
	q, err := Parse(req, TriggersSchema)
	if err != nil {
		return f, page, false, err
	}
	var types valueSet[task.TriggerAutomationSpecType]
	var deployers []string
	for _, c := range q.Conds {
		switch c.Field {
		case "name":
			if sub, ok := substring(c); ok {
				f.NameContains = append(f.NameContains, sub)
			} else {
				err = setOnce(&f.NameEquals, c)
			}
		case "task_name":
			err = setOnce(&f.TaskName, c)
		case "task_version":
			err = setOnce(&f.TaskVersion, c)
		case "active":
			var b bool
			b, err = strconv.ParseBool(strings.TrimSpace(c.Values[0]))
			if err != nil {
				return f, page, false, errs.Invalidf("filter on \"active\": %q is not true or false", c.Values[0])
			}
			if f.Active != nil && *f.Active != b {
				matchNone = true
			}
			f.Active = &b
		case "automation_type":
			types.and(c.Func, c.TriggerTypes, task.TriggerAutomationSpecType_name)
		case "deployed_by":
			deployers = intersect(deployers, c.Values)
		}
		if err != nil {
			return f, page, false, err
		}
	}
	if types.set != nil {
		f.AutomationTypes = []string{}
		for t, ok := range types.set {
			if ok {
				f.AutomationTypes = append(f.AutomationTypes, t.String())
			}
		}
	}
	if deployers != nil {
		f.DeployedBy = deployers
	}
	return f, q.Page, matchNone, nil
}
