package app

import (
	"context"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/listreq"
)

// listSchema is what List accepts: the SDK's `flyte get app` filters by
// creator and by deployment status (enum names such as
// DEPLOYMENT_STATUS_ACTIVE) and sorts by creation time.
var listSchema = listreq.Schema{
	Listing: "apps",
	Fields: map[string]listreq.Field{
		"created_by":   {Kind: listreq.KindString, Funcs: []common.Filter_Function{common.Filter_EQUAL, common.Filter_VALUE_IN}},
		"status_phase": {Kind: listreq.KindString, Funcs: []common.Filter_Function{common.Filter_EQUAL, common.Filter_VALUE_IN}},
	},
	Sorts:            []listreq.SortKey{{Key: "created_at", Ascending: true, Descending: true}},
	DefaultAscending: true,
}

// parseStatus reads a deployment status: its enum name, the name without
// DEPLOYMENT_STATUS_ (any case) or its number.
func parseStatus(v string) (int32, error) {
	if n, err := strconv.ParseInt(v, 10, 32); err == nil {
		if _, ok := pb.Status_DeploymentStatus_name[int32(n)]; ok {
			return int32(n), nil
		}
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "DEPLOYMENT_STATUS_") {
		name = "DEPLOYMENT_STATUS_" + name
	}
	if n, ok := pb.Status_DeploymentStatus_value[name]; ok {
		return n, nil
	}
	return 0, errs.Invalidf("%q is not a deployment status (e.g. ACTIVE or DEPLOYMENT_STATUS_FAILED)", v)
}

func (s *Service) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	m := req.Msg
	q, err := listreq.Parse(m.GetRequest(), listSchema)
	if err != nil {
		return nil, err
	}
	var f Filter
	var org string
	switch by := m.GetFilterBy().(type) {
	case *pb.ListRequest_Project:
		p := by.Project
		if p.GetName() == "" {
			return nil, errs.Invalidf("list apps: project.name is required")
		}
		org = p.GetOrganization()
		f = Filter{Org: ident.Org(org), Project: p.GetName(), Domain: p.GetDomain()}
	case *pb.ListRequest_Org:
		org = by.Org
		f = Filter{Org: ident.Org(org)}
	case *pb.ListRequest_ClusterId:
		org = by.ClusterId.GetOrganization()
		f = Filter{Org: ident.Org(org)}
	case *pb.ListRequest_Artifact:
		return nil, errs.Invalidf("list apps: filtering by consumed artifact is not supported")
	case nil:
	}
	for _, c := range q.Conds {
		switch c.Field {
		case "created_by":
			f.CreatedBy = append(f.CreatedBy, c.Values...)
		case "status_phase":
			for _, v := range c.Values {
				n, err := parseStatus(v)
				if err != nil {
					return nil, err
				}
				f.Phases = append(f.Phases, n)
			}
		}
	}
	f.NewestFirst = !q.Sort.Ascending
	rows, next, err := s.store.List(ctx, f, q.Page)
	if err != nil {
		return nil, err
	}
	out := &pb.ListResponse{Token: next, Apps: make([]*pb.App, len(rows))}
	for i, r := range rows {
		if out.Apps[i], err = s.view(ctx, r, org); err != nil {
			return nil, err
		}
	}
	if m.GetIncludeTotalCount() {
		if out.TotalCount, err = s.store.Count(ctx, f); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(out), nil
}
