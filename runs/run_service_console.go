package runs

import (
	"context"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/listreq"
	"fmgr.dev/internal/store"
)

// groupsSchema is what WatchGroups' ListRequest accepts: a page and the
// order by the groups' latest run; groups are not filtered.
var groupsSchema = listreq.Schema{
	Listing: "task groups",
	Fields:  map[string]listreq.Field{},
	Sorts:   []listreq.SortKey{{Key: "created_at", Ascending: true, Descending: true}},
}

// WatchGroups streams a project's runs grouped by task (runstate.WatchGroups).
func (s *RunService) WatchGroups(ctx context.Context, req *connect.Request[workflow.WatchGroupsRequest], stream *connect.ServerStream[workflow.WatchGroupsResponse]) error {
	f, page, err := parseGroups(req.Msg)
	if err != nil {
		return err
	}
	return s.state.WatchGroups(ctx, f, page, stream.Send)
}

func parseGroups(req *workflow.WatchGroupsRequest) (store.GroupFilter, store.Page, error) {
	var f store.GroupFilter
	org, project, domain, err := ident.Project("project_id", req.GetProjectId())
	if err != nil {
		return f, store.Page{}, err
	}
	f.Org, f.Project, f.Domain = org, project, domain
	if d := req.GetStartDate(); d != nil {
		if err := d.CheckValid(); err != nil {
			return f, store.Page{}, errs.Invalidf("start_date: %v", err)
		}
		f.CreatedAfter = d.AsTime()
	}
	if d := req.GetEndDate(); d != nil {
		if err := d.CheckValid(); err != nil {
			return f, store.Page{}, errs.Invalidf("end_date: %v", err)
		}
		f.CreatedBefore = d.AsTime()
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return f, store.Page{}, errs.Invalidf("start_date must be before end_date")
	}
	q, err := listreq.Parse(req.GetRequest(), groupsSchema)
	if err != nil {
		return f, store.Page{}, err
	}
	if len(q.Conds) > 0 {
		return f, store.Page{}, errs.Invalidf("task groups cannot be filtered; narrow them with start_date and end_date")
	}
	f.Ascending = q.Sort.Ascending
	switch known := req.GetKnownSortFields(); {
	case len(known) > 1:
		return f, store.Page{}, errs.Invalidf("known_sort_fields: sorting by more than one key is not supported")
	case len(known) == 1:
		if _, ok := known[0].GetSortBy().(*workflow.WatchGroupsRequest_KnownSortField_CreatedAt); !ok {
			return f, store.Page{}, errs.Invalidf("known_sort_fields[0]: set created_at")
		}
		f.Ascending = known[0].GetCreatedAt() == common.Sort_ASCENDING
	}
	return f, q.Page, nil
}

// GetActionLogContext says where one attempt's logs are (runstate.AttemptLogContext).
func (s *RunService) GetActionLogContext(ctx context.Context, req *connect.Request[workflow.GetActionLogContextRequest]) (*connect.Response[workflow.GetActionLogContextResponse], error) {
	resp, err := s.state.AttemptLogContext(ctx, req.Msg.GetActionId(), req.Msg.GetAttempt())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}
