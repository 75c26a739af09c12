package runs_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/store"
	"google.golang.org/protobuf/proto"
)

// deployAs records a task version deployed by subject. DeployTask cannot
// set a deployer without authentication, so this writes through the store
// the row an authenticated deploy would.
func deployAs(t *testing.T, h *harness, name, version, subject string) {
	t.Helper()
	id := taskID(name, version)
	spec := taskSpec(id, "img")
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = h.st.Tasks.Deploy(context.Background(), store.Task{
		TaskID:     store.TaskID{Project: id.Project, Domain: id.Domain, Name: name, Version: version},
		SpecDigest: store.SpecDigest(b), ShortName: spec.GetShortName(),
		EnvironmentName: spec.GetEnvironment().GetName(), DeployedBy: subject,
	}, b)
	if err != nil {
		t.Fatalf("deploy %s@%s as %q: %v", name, version, subject, err)
	}
}

// listed is "name@version" of each task of a listing, in its order.
func listed(tasks []*task.Task) []string {
	out := make([]string, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.GetTaskId().GetName() + "@" + tk.GetTaskId().GetVersion()
	}
	return out
}

func filtered(filters ...*common.Filter) *task.ListTasksRequest {
	return &task.ListTasksRequest{ScopeBy: inProject("flytesnacks"), Request: &common.ListRequest{Filters: filters}}
}

func cond(fn common.Filter_Function, field string, values ...string) *common.Filter {
	return &common.Filter{Function: fn, Field: field, Values: values}
}

// The official console's task list: descriptions and its filters.
func TestListTasksConsoleFilters(t *testing.T) {
	eachDatabase(t, autoCreate, func(t *testing.T, h *harness) {
		ctx := context.Background()
		deployAs(t, h, "env.a", "v1", "alice")
		deployAs(t, h, "env.b", "v1", "bob")
		deployAs(t, h, "env.a", "v2", "alice")
		mustDeploy(t, h, "env.c", "v1") // deployed without a known subject
		deployAs(t, h, "env.b", "v2", "carol")
		newestFirst := []string{"env.b@v2", "env.c@v1", "env.a@v2", "env.b@v1", "env.a@v1"}

		all := collectTasks(t, h, filtered(), 2)
		if got := listed(all); !slices.Equal(got, newestFirst) {
			t.Fatalf("listing = %v, want %v", got, newestFirst)
		}
		for _, tk := range all {
			// taskSpec documents "env.x" as "does x".
			_, short, _ := strings.Cut(tk.GetTaskId().GetName(), ".")
			if d := tk.GetMetadata().GetShortDescription(); d != "does "+short {
				t.Errorf("%s: short_description = %q, want %q", tk.GetTaskId().GetName(), d, "does "+short)
			}
		}

		// deployed_by: EQUAL, VALUE_IN, their intersection, and the known filter.
		for _, c := range []struct {
			name string
			req  *task.ListTasksRequest
			want []string
		}{
			{"EQUAL", filtered(cond(common.Filter_EQUAL, "deployed_by", "alice")), []string{"env.a@v2", "env.a@v1"}},
			{"VALUE_IN", filtered(cond(common.Filter_VALUE_IN, "deployed_by", "bob", "carol", "nobody")), []string{"env.b@v2", "env.b@v1"}},
			{"intersection", filtered(
				cond(common.Filter_VALUE_IN, "deployed_by", "bob", "carol"),
				cond(common.Filter_VALUE_IN, "deployed_by", "alice", "bob")), []string{"env.b@v1"}},
			{"disjoint", filtered(
				cond(common.Filter_EQUAL, "deployed_by", "alice"),
				cond(common.Filter_EQUAL, "deployed_by", "bob")), nil},
			{"known filter and VALUE_IN", func() *task.ListTasksRequest {
				r := filtered(cond(common.Filter_VALUE_IN, "deployed_by", "alice", "carol"))
				r.KnownFilters = []*task.ListTasksRequest_KnownFilter{{FilterBy: &task.ListTasksRequest_KnownFilter_DeployedBy{DeployedBy: "carol"}}}
				return r
			}(), []string{"env.b@v2"}},
			{"known filter outside VALUE_IN", func() *task.ListTasksRequest {
				r := filtered(cond(common.Filter_EQUAL, "deployed_by", "alice"))
				r.KnownFilters = []*task.ListTasksRequest_KnownFilter{{FilterBy: &task.ListTasksRequest_KnownFilter_DeployedBy{DeployedBy: "bob"}}}
				return r
			}(), nil},
		} {
			// A page of one: the store filters, so no page comes back empty
			// with a token.
			if got := listed(collectTasks(t, h, c.req, 1)); !slices.Equal(got, c.want) {
				t.Errorf("deployed_by %s: %v, want %v", c.name, got, c.want)
			}
		}

		// updated_at (and created_at) bound the deploy time. The bounds are
		// the listed deploy times themselves, so no clock is assumed.
		at := func(i int) string { return all[i].GetMetadata().GetDeployedAt().AsTime().Format(time.RFC3339Nano) }
		mid := all[2].GetMetadata().GetDeployedAt().AsTime()
		var after, upTo []string
		for _, tk := range all {
			if tk.GetMetadata().GetDeployedAt().AsTime().After(mid) {
				after = append(after, listed([]*task.Task{tk})...)
			} else {
				upTo = append(upTo, listed([]*task.Task{tk})...)
			}
		}
		if got := listed(collectTasks(t, h, filtered(cond(common.Filter_GREATER_THAN, "updated_at", at(2))), 1)); !slices.Equal(got, after) {
			t.Errorf("updated_at > %s: %v, want %v", at(2), got, after)
		}
		if got := listed(collectTasks(t, h, filtered(cond(common.Filter_LESS_THAN_OR_EQUAL, "updated_at", at(2))), 1)); !slices.Equal(got, upTo) {
			t.Errorf("updated_at <= %s: %v, want %v", at(2), got, upTo)
		}
		between := filtered(
			cond(common.Filter_GREATER_THAN_OR_EQUAL, "created_at", at(3)),
			cond(common.Filter_LESS_THAN_OR_EQUAL, "updated_at", at(1)),
			cond(common.Filter_EQUAL, "deployed_by", "alice"))
		if got, want := listed(collectTasks(t, h, between, 1)), []string{"env.a@v2"}; !slices.Equal(got, want) {
			t.Errorf("alice's between %s and %s: %v, want %v", at(3), at(1), got, want)
		}

		// trigger_types: no task has a trigger, so only filters admitting
		// NONE keep any.
		for _, c := range []struct {
			f    *common.Filter
			want []string
		}{
			{cond(common.Filter_EQUAL, "trigger_types", "TYPE_NONE"), newestFirst},
			{cond(common.Filter_VALUE_IN, "trigger_types", "TYPE_SCHEDULE", "TYPE_NONE"), newestFirst},
			{cond(common.Filter_VALUE_NOT_IN, "trigger_types", "TYPE_SCHEDULE", "TYPE_ARTIFACT"), newestFirst},
			{cond(common.Filter_EQUAL, "trigger_types", "TYPE_SCHEDULE"), nil},
			{cond(common.Filter_VALUE_IN, "trigger_types", "2", "3"), nil},
			{cond(common.Filter_NOT_EQUAL, "trigger_types", "none"), nil},
		} {
			resp := must[*task.ListTasksResponse](t)(listTasks(ctx, h, filtered(c.f)))
			if got := listed(resp.GetTasks()); !slices.Equal(got, c.want) {
				t.Errorf("trigger_types %s %v: %v, want %v", c.f.GetFunction(), c.f.GetValues(), got, c.want)
			}
		}

		// Everything else is refused, naming the field.
		for _, c := range []struct {
			f         *common.Filter
			fragments []string
		}{
			{cond(common.Filter_EQUAL, "environment", "env"), []string{`"environment"`, "deployed_by", "trigger_types", "updated_at"}},
			{cond(common.Filter_CONTAINS, "deployed_by", "al"), []string{`"deployed_by"`, "EQUAL, VALUE_IN"}},
			{cond(common.Filter_EQUAL, "updated_at", "2026-01-02T03:04:05Z"), []string{`"updated_at"`, "GREATER_THAN"}},
			{cond(common.Filter_EQUAL, "trigger_types", "cron"), []string{`"trigger_types"`, `"cron" is not a trigger type`}},
		} {
			_, err := listTasks(ctx, h, filtered(c.f))
			wantCode(t, err, connect.CodeInvalidArgument, c.fragments...)
		}
	})
}
