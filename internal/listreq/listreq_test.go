package listreq

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

func filter(fn common.Filter_Function, field string, values ...string) *common.Filter {
	return &common.Filter{Function: fn, Field: field, Values: values}
}

func sortBy(key string, dir common.Sort_Direction) *common.Sort {
	return &common.Sort{Key: key, Direction: dir}
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// wantInvalid fails unless err is ErrInvalid with every fragment in its message.
func wantInvalid(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("error = %v, want InvalidArgument", err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not mention %q", err, f)
		}
	}
}

func TestPage(t *testing.T) {
	for _, tc := range []struct {
		limit uint32
		want  int
	}{{0, DefaultLimit}, {1, 1}, {100, 100}, {200, 200}, {201, MaxLimit}, {1 << 31, MaxLimit}} {
		if got := Page(tc.limit, "tok"); got.Limit != tc.want || got.Token != "tok" {
			t.Errorf("Page(%d) = %+v, want limit %d", tc.limit, got, tc.want)
		}
	}
}

func TestParseRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *common.ListRequest
		want store.RunFilter
		page store.Page
	}{
		{name: "nil request", req: nil, want: store.RunFilter{}, page: store.Page{Limit: DefaultLimit}},
		{
			name: "what flyte get run sends by default",
			req:  &common.ListRequest{Limit: 100, Token: "t1", SortBy: sortBy("created_at", common.Sort_ASCENDING)},
			want: store.RunFilter{Ascending: true},
			page: store.Page{Limit: 100, Token: "t1"},
		},
		{
			name: "limit clamped, descending",
			req:  &common.ListRequest{Limit: 500, SortBy: sortBy("created_at", common.Sort_DESCENDING)},
			page: store.Page{Limit: MaxLimit},
		},
		{
			name: "sort_by_fields wins over sort_by",
			req: &common.ListRequest{
				SortBy:       sortBy("created_at", common.Sort_DESCENDING),
				SortByFields: []*common.Sort{sortBy("created_at", common.Sort_ASCENDING)},
			},
			want: store.RunFilter{Ascending: true},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "empty sort key keeps created_at",
			req:  &common.ListRequest{SortBy: sortBy("", common.Sort_ASCENDING)},
			want: store.RunFilter{Ascending: true},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "phase EQUAL by number (flyte get run --in-phase succeeded)",
			req:  &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "phase", "5")}},
			want: store.RunFilter{Phases: []phase.Phase{phase.Succeeded}},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "phase 10 split into characters by the SDK",
			req:  &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "phase", "1", "0")}},
			want: store.RunFilter{Phases: []phase.Phase{phase.Recovered}},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "phase VALUE_IN by names",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_VALUE_IN, "phase", "ACTION_PHASE_FAILED", "succeeded", "Running"),
			}},
			want: store.RunFilter{Phases: []phase.Phase{phase.Running, phase.Succeeded, phase.Failed}},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "phase VALUE_IN and NOT_EQUAL intersect",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_VALUE_IN, "phase", "5", "6", "7"),
				filter(common.Filter_NOT_EQUAL, "phase", "FAILED"),
			}},
			want: store.RunFilter{Phases: []phase.Phase{phase.Succeeded, phase.Aborted}},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "disjoint phases match nothing",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_EQUAL, "phase", "5"),
				filter(common.Filter_EQUAL, "phase", "6"),
			}},
			want: store.RunFilter{Phases: []phase.Phase{noPhase}},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "task, version, creator",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_EQUAL, "task_name", "env.main"),
				filter(common.Filter_EQUAL, "task_version", "v1"),
				filter(common.Filter_EQUAL, "created_by", "anonymous"),
			}},
			want: store.RunFilter{TaskName: "env.main", TaskVersion: "v1", CreatedBy: "anonymous"},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "created_at GTE and LT as the SDK sends them",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_GREATER_THAN_OR_EQUAL, "created_at", "2026-01-02T03:04:05+00:00"),
				filter(common.Filter_LESS_THAN, "created_at", "2026-01-03T00:00:00.250000+00:00"),
			}},
			want: store.RunFilter{CreatedAfter: ts("2026-01-02T03:04:05Z"), CreatedBefore: ts("2026-01-03T00:00:00.25Z")},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "created_at GT and LTE move to the next microsecond",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_GREATER_THAN, "created_at", "2026-01-02T03:04:05Z"),
				filter(common.Filter_LESS_THAN_OR_EQUAL, "created_at", "2026-01-03T02:00:00+02:00"),
			}},
			want: store.RunFilter{CreatedAfter: ts("2026-01-02T03:04:05.000001Z"), CreatedBefore: ts("2026-01-03T00:00:00.000001Z")},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "sub-microsecond bounds round to what the store keeps",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_GREATER_THAN_OR_EQUAL, "created_at", "2026-01-02T00:00:00.0000015Z"),
				filter(common.Filter_LESS_THAN, "created_at", "2026-01-02T00:00:01.0000015Z"),
			}},
			want: store.RunFilter{CreatedAfter: ts("2026-01-02T00:00:00.000002Z"), CreatedBefore: ts("2026-01-02T00:00:01.000002Z")},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "the tightest bounds win",
			req: &common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_GREATER_THAN_OR_EQUAL, "created_at", "2026-01-01T00:00:00Z"),
				filter(common.Filter_GREATER_THAN_OR_EQUAL, "created_at", "2026-01-05T00:00:00Z"),
				filter(common.Filter_LESS_THAN, "created_at", "2026-02-01T00:00:00Z"),
				filter(common.Filter_LESS_THAN, "created_at", "2026-01-20T00:00:00Z"),
			}},
			want: store.RunFilter{CreatedAfter: ts("2026-01-05T00:00:00Z"), CreatedBefore: ts("2026-01-20T00:00:00Z")},
			page: store.Page{Limit: DefaultLimit},
		},
		{
			name: "the official console's search box",
			req: &common.ListRequest{Limit: 100, SortBy: &common.Sort{Key: "created_at"}, Filters: []*common.Filter{
				filter(common.Filter_CONTAINS_CASE_INSENSITIVE, "task_name", "Boom"),
				filter(common.Filter_GREATER_THAN_OR_EQUAL, "created_at", "2026-01-05T00:00:00Z"),
			}},
			want: store.RunFilter{TaskNameContains: []store.Substring{{Text: "Boom", IgnoreCase: true}}, CreatedAfter: ts("2026-01-05T00:00:00Z")},
			page: store.Page{Limit: 100},
		},
		{
			name: "empty raw filters are ignored",
			req:  &common.ListRequest{RawFilters: []string{"", "  "}},
			page: store.Page{Limit: DefaultLimit},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, page, err := ParseRuns(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f, tc.want) {
				t.Errorf("filter = %+v\nwant     %+v", f, tc.want)
			}
			if tc.page.Limit == 0 {
				tc.page.Limit = DefaultLimit
			}
			if page != tc.page {
				t.Errorf("page = %+v, want %+v", page, tc.page)
			}
		})
	}
}

func TestParseRunsRejects(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       *common.ListRequest
		fragments []string
	}{
		{"unknown field", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "colour", "red")}},
			[]string{`"colour"`, "runs", "phase", "task_name"}},
		{"labels", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "labels.team", "ml")}},
			[]string{"filtering by labels is not supported yet"}},
		{"label key exists", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EXISTS, "labels.team")}},
			[]string{"filtering by labels is not supported yet"}},
		{"updated_at", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_GREATER_THAN_OR_EQUAL, "updated_at", "2026-01-01T00:00:00Z")}},
			[]string{"updated_at", "not supported yet"}},
		{"unsupported function", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_CONTAINS, "task_version", "x")}},
			[]string{"CONTAINS", `"task_version"`, "EQUAL"}},
		{"phase by comparison", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_GREATER_THAN, "phase", "4")}},
			[]string{"GREATER_THAN", `"phase"`}},
		{"bad phase", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "phase", "DONE")}},
			[]string{`"DONE"`, "not an action phase"}},
		{"phase out of range", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_VALUE_IN, "phase", "5", "42")}},
			[]string{`"42"`}},
		{"bad time", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_LESS_THAN, "created_at", "yesterday")}},
			[]string{`"yesterday"`, "RFC 3339"}},
		{"time without zone", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_LESS_THAN, "created_at", "2026-01-01T00:00:00")}},
			[]string{"RFC 3339"}},
		{"EQUAL with no value", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "task_name")}},
			[]string{"exactly one value"}},
		{"EQUAL with two values", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "task_name", "a.b", "c.d")}},
			[]string{"exactly one value", "got 2"}},
		{"VALUE_IN with no value", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_VALUE_IN, "phase")}},
			[]string{"at least one value"}},
		{"empty value", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "created_by", "")}},
			[]string{"non-empty"}},
		{"conflicting values", &common.ListRequest{Filters: []*common.Filter{
			filter(common.Filter_EQUAL, "task_name", "a.x"), filter(common.Filter_EQUAL, "task_name", "b.y")}},
			[]string{"conflicting", `"a.x"`, `"b.y"`}},
		{"missing field name", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "", "x")}},
			[]string{"filters[0].field is required"}},
		{"raw filters", &common.ListRequest{RawFilters: []string{"eq(phase,5)"}},
			[]string{"raw_filters are not supported"}},
		{"sort key", &common.ListRequest{SortBy: sortBy("name", common.Sort_ASCENDING)},
			[]string{`"name"`, "created_at"}},
		{"two sort keys", &common.ListRequest{SortByFields: []*common.Sort{
			sortBy("created_at", common.Sort_ASCENDING), sortBy("created_at", common.Sort_DESCENDING)}},
			[]string{"more than one key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseRuns(tc.req)
			wantInvalid(t, err, tc.fragments...)
		})
	}
}

func TestParseActions(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *common.ListRequest
		want ActionQuery
	}{
		{"default", nil, ActionQuery{Page: store.Page{Limit: DefaultLimit}}},
		{"what the SDK sends", &common.ListRequest{Limit: 100, Token: "x", SortBy: sortBy("created_at", common.Sort_ASCENDING)},
			ActionQuery{Page: store.Page{Limit: 100, Token: "x"}}},
		{"children of the root", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "parent_name", "a0")}},
			ActionQuery{Filter: store.ActionFilter{Parent: "a0"}, Page: store.Page{Limit: DefaultLimit}}},
		// Action.listall(in_phase=...) and Run.first_failure().
		{"one phase", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "phase", "6")}},
			ActionQuery{Filter: store.ActionFilter{Phases: []phase.Phase{phase.Failed}}, Page: store.Page{Limit: DefaultLimit}}},
		{"phases by name", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_VALUE_IN, "phase", "succeeded", "ACTION_PHASE_FAILED")}},
			ActionQuery{Filter: store.ActionFilter{Phases: []phase.Phase{phase.Succeeded, phase.Failed}}, Page: store.Page{Limit: DefaultLimit}}},
		{"traces only", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "action_type", "trace")}},
			ActionQuery{Filter: store.ActionFilter{Types: []store.ActionType{store.ActionTypeTrace}}, Page: store.Page{Limit: DefaultLimit}}},
		{"no traces", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_NOT_EQUAL, "action_type", "ACTION_TYPE_TRACE")}},
			ActionQuery{Filter: store.ActionFilter{Types: []store.ActionType{store.ActionTypeUnspecified, store.ActionTypeTask, store.ActionTypeCondition}},
				Page: store.Page{Limit: DefaultLimit}}},
		{"contradicting phases", &common.ListRequest{Filters: []*common.Filter{
			filter(common.Filter_EQUAL, "phase", "5"), filter(common.Filter_EQUAL, "phase", "6")}},
			ActionQuery{Filter: store.ActionFilter{Phases: []phase.Phase{noPhase}}, Page: store.Page{Limit: DefaultLimit}}},
		{"updated since", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_GREATER_THAN_OR_EQUAL, "updated_at", "2026-01-02T15:04:05Z")}},
			ActionQuery{Filter: store.ActionFilter{UpdatedAfter: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}, Page: store.Page{Limit: DefaultLimit}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseActionQuery(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name      string
		req       *common.ListRequest
		fragments []string
	}{
		{"bad phase", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "phase", "done")}},
			[]string{`"done" is not an action phase`}},
		{"bad action type", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "action_type", "job")}},
			[]string{`"job" is not an action type`, "TRACE"}},
		{"newest first", &common.ListRequest{SortBy: sortBy("created_at", common.Sort_DESCENDING)},
			[]string{"created_at ascending"}},
		{"bad parent", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "parent_name", "../a0")}},
			[]string{"filters.parent_name"}},
		{"unknown field", &common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "task_name", "x")}},
			[]string{`"task_name"`, "parent_name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseActionQuery(tc.req)
			wantInvalid(t, err, tc.fragments...)
		})
	}
}

func TestParseTasks(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *common.ListRequest
		want TaskQuery
	}{
		{"default", nil, TaskQuery{Page: store.Page{Limit: DefaultLimit}}},
		{
			"Task.get(auto_version=latest)",
			&common.ListRequest{Limit: 1, SortBy: sortBy("created_at", common.Sort_DESCENDING),
				Filters: []*common.Filter{filter(common.Filter_EQUAL, "name", "env.main")}},
			TaskQuery{Filter: store.TaskFilter{Name: "env.main"}, Page: store.Page{Limit: 1}},
		},
		{
			"flyte get task (ascending)",
			&common.ListRequest{Limit: 100, SortBy: sortBy("created_at", common.Sort_ASCENDING)},
			TaskQuery{Page: store.Page{Limit: 100}, Ascending: true},
		},
		{
			"tasks of an environment",
			&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_CONTAINS, "name", "env.")}},
			TaskQuery{Filter: store.TaskFilter{NameContains: []store.Substring{{Text: "env."}}}, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"the official console's search box",
			&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_CONTAINS_CASE_INSENSITIVE, "name", "Ma")},
				SortByFields: []*common.Sort{{Key: "created_at"}}},
			TaskQuery{Filter: store.TaskFilter{NameContains: []store.Substring{{Text: "Ma", IgnoreCase: true}}}, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"deployed_by sets intersect",
			&common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_VALUE_IN, "deployed_by", "bob", "alice", "carol"),
				filter(common.Filter_VALUE_IN, "deployed_by", "carol", "alice", "alice"),
			}},
			TaskQuery{Filter: store.TaskFilter{DeployedBy: []string{"alice", "carol"}}, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"deployed_by with nobody in common",
			&common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_EQUAL, "deployed_by", "alice"), filter(common.Filter_EQUAL, "deployed_by", "bob"),
			}},
			TaskQuery{Filter: store.TaskFilter{DeployedBy: []string{}}, MatchNone: true, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"updated_at is the deploy time",
			&common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_GREATER_THAN_OR_EQUAL, "updated_at", "2026-01-02T03:04:05Z"),
				filter(common.Filter_LESS_THAN, "created_at", "2026-01-03T00:00:00Z"),
			}},
			TaskQuery{Filter: store.TaskFilter{
				DeployedAfter:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
				DeployedBefore: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC),
			}, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"trigger_types narrow to the types every filter admits",
			&common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_VALUE_IN, "trigger_types", "TYPE_NONE", "schedule"),
				filter(common.Filter_VALUE_NOT_IN, "trigger_types", "3"),
				filter(common.Filter_EQUAL, "trigger_types", ""),
			}},
			TaskQuery{Filter: store.TaskFilter{TriggerTypes: []string{"TYPE_NONE"}}, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"trigger_types asking for a trigger",
			&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_VALUE_IN, "trigger_types", "TYPE_SCHEDULE", "ARTIFACT")}},
			TaskQuery{Filter: store.TaskFilter{TriggerTypes: []string{"TYPE_ARTIFACT", "TYPE_SCHEDULE"}}, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"trigger_types excluding none",
			&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_NOT_EQUAL, "trigger_types", "TYPE_UNSPECIFIED")}},
			TaskQuery{Filter: store.TaskFilter{TriggerTypes: []string{"TYPE_ARTIFACT", "TYPE_SCHEDULE"}}, Page: store.Page{Limit: DefaultLimit}},
		},
		{
			"trigger_types admitting nothing match none",
			&common.ListRequest{Filters: []*common.Filter{
				filter(common.Filter_EQUAL, "trigger_types", "NONE"), filter(common.Filter_EQUAL, "trigger_types", "SCHEDULE"),
			}},
			TaskQuery{Filter: store.TaskFilter{TriggerTypes: []string{}}, MatchNone: true, Page: store.Page{Limit: DefaultLimit}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTasks(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	_, err := ParseTasks(&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "version", "v1")}})
	wantInvalid(t, err, `"version"`, "tasks", "name")
	_, err = ParseTasks(&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_ENDS_WITH, "name", "x")}})
	wantInvalid(t, err, "ENDS_WITH", "EQUAL, CONTAINS")
	_, err = ParseTasks(&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "trigger_types", "cron")}})
	wantInvalid(t, err, `"trigger_types"`, `"cron" is not a trigger type`)
	_, err = ParseTasks(&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_CONTAINS, "deployed_by", "al")}})
	wantInvalid(t, err, "CONTAINS", `"deployed_by"`, "EQUAL, VALUE_IN")
	_, err = ParseTasks(&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_GREATER_THAN, "updated_at", "yesterday")}})
	wantInvalid(t, err, `"updated_at"`, "RFC 3339")

	v, err := ParseVersions(&common.ListRequest{Limit: 3, SortBy: sortBy("created_at", common.Sort_DESCENDING)})
	if err != nil || v.Page.Limit != 3 || v.Ascending {
		t.Fatalf("ParseVersions = %+v, %v", v, err)
	}
	_, err = ParseVersions(&common.ListRequest{Filters: []*common.Filter{filter(common.Filter_EQUAL, "name", "x")}})
	wantInvalid(t, err, `"name"`, "task versions")
}

func TestParseProjects(t *testing.T) {
	type states = []store.ProjectState
	active, archived := states{store.ProjectActive}, states{store.ProjectArchived}
	for _, tc := range []struct {
		name string
		req  *project.ListProjectsRequest
		want store.ProjectFilter
		page store.Page
	}{
		{"empty", &project.ListProjectsRequest{}, store.ProjectFilter{}, store.Page{Limit: DefaultLimit}},
		{
			"what Project.listall sends",
			&project.ListProjectsRequest{Limit: 100, Token: "t", Filters: "eq(state, 0)", SortBy: sortBy("created_at", common.Sort_ASCENDING)},
			store.ProjectFilter{States: active}, store.Page{Limit: 100, Token: "t"},
		},
		{
			"what the official console sends",
			&project.ListProjectsRequest{Limit: 200, Filters: "value_in(state,0;1;2)"},
			store.ProjectFilter{States: states{0, 1, 2}}, store.Page{Limit: 200},
		},
		{
			"archived, by name, org",
			&project.ListProjectsRequest{Org: "acme", Filters: "eq(state,ARCHIVED)+eq(state, 1)"},
			store.ProjectFilter{Org: "acme", States: archived}, store.Page{Limit: DefaultLimit},
		},
		{
			"state by full enum name",
			&project.ListProjectsRequest{Filters: "eq(state, PROJECT_STATE_ACTIVE)", Limit: 1000},
			store.ProjectFilter{States: active}, store.Page{Limit: MaxLimit},
		},
		{
			"comparisons and exclusions intersect",
			&project.ListProjectsRequest{Filters: "gte(state,1)+ne(state,SYSTEM_GENERATED)+value_not_in(state, 3)"},
			store.ProjectFilter{States: archived}, store.Page{Limit: DefaultLimit},
		},
		{
			"states that cannot all hold match none",
			&project.ListProjectsRequest{Filters: "lt(state,1)+gt(state,2)"},
			store.ProjectFilter{States: states{store.NoProjectState}}, store.Page{Limit: DefaultLimit},
		},
		{
			"text fields",
			&project.ListProjectsRequest{Filters: "contains(name,Flyte) + eq(id, 'p1') + value_in(identifier,a;b) + lte(description,z) + value_not_in(id,x)"},
			store.ProjectFilter{Text: []store.TextCond{
				{Column: "display_name", Op: store.TextContains, Values: []string{"Flyte"}},
				{Column: "name", Op: store.TextEq, Values: []string{"p1"}},
				{Column: "name", Op: store.TextIn, Values: []string{"a", "b"}},
				{Column: "description", Op: store.TextLte, Values: []string{"z"}},
				{Column: "name", Op: store.TextNotIn, Values: []string{"x"}},
			}},
			store.Page{Limit: DefaultLimit},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, page, err := ParseProjects(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f, tc.want) || page != tc.page {
				t.Fatalf("got %+v %+v, want %+v %+v", f, page, tc.want, tc.page)
			}
		})
	}
	for _, tc := range []struct {
		req       *project.ListProjectsRequest
		fragments []string
	}{
		{&project.ListProjectsRequest{Filters: "eq(owner, foo)"}, []string{`"eq(owner, foo)"`, `unknown field "owner"`, "fields state, id, name"}},
		{&project.ListProjectsRequest{Filters: "like(state, 0)"}, []string{`unknown function "like"`}},
		{&project.ListProjectsRequest{Filters: "state = 0"}, []string{"not a function call"}},
		{&project.ListProjectsRequest{Filters: "eq(state)"}, []string{"has no value"}},
		{&project.ListProjectsRequest{Filters: "value_in(state,;)"}, []string{"has no value"}},
		{&project.ListProjectsRequest{Filters: "contains(state, 1)"}, []string{"contains on state"}},
		{&project.ListProjectsRequest{Filters: "eq(state, 9)"}, []string{`"9"`, "not a project state"}},
		{&project.ListProjectsRequest{SortBy: sortBy("description", common.Sort_ASCENDING)}, []string{`"description"`}},
	} {
		_, _, err := ParseProjects(tc.req)
		wantInvalid(t, err, tc.fragments...)
	}
}

func TestParsePhase(t *testing.T) {
	for in, want := range map[string]phase.Phase{
		"0": phase.Unspecified, "5": phase.Succeeded, "10": phase.Recovered,
		"ACTION_PHASE_TIMED_OUT": phase.TimedOut, "timed_out": phase.TimedOut, " Queued ": phase.Queued,
		"waiting_for_resources": phase.WaitingForResources,
	} {
		if got, err := ParsePhase(in); err != nil || got != want {
			t.Errorf("ParsePhase(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "11", "-1", "05", "+5", "done", "ACTION_PHASE_"} {
		if got, err := ParsePhase(in); err == nil {
			t.Errorf("ParsePhase(%q) = %v, want an error", in, got)
		}
	}
}
