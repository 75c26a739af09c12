package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"unicode/utf8"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/project"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/listreq"
	"fmgr.dev/internal/store"
)

// ProjectService implements flyteidl2.project.ProjectService over the
// store. A project's id is its identity (store name); its name is a
// display name. Every project has the manager's global domains.
type ProjectService struct {
	st  *store.Store
	cfg config.Projects
	log *slog.Logger
}

var _ projectconnect.ProjectServiceHandler = (*ProjectService)(nil)

// NewProjectService returns the ProjectService. Call Seed once at setup.
func NewProjectService(st *store.Store, cfg config.Projects, log *slog.Logger) *ProjectService {
	if log == nil {
		log = slog.Default()
	}
	return &ProjectService{st: st, cfg: cfg, log: log}
}

// Handler returns the service's Connect handler and the path to mount it on.
func (s *ProjectService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return projectconnect.NewProjectServiceHandler(s, opts...)
}

// Seed creates the configured projects.seed (in the empty org, the one
// SDKs pointed at a local endpoint use) unless they exist. Existing
// projects are left as they are, archived ones included.
func (s *ProjectService) Seed(ctx context.Context) error {
	for _, name := range s.cfg.Seed {
		if err := checkProjectID("projects.seed", name); err != nil {
			return err
		}
		_, created, err := s.st.Projects.EnsureExists(ctx, "", name)
		if err != nil {
			return fmt.Errorf("seed project %q: %w", name, err)
		}
		if created {
			s.log.InfoContext(ctx, "project created from projects.seed", "project", name)
		}
	}
	return nil
}

// projectID mirrors ident's rule for one identifier segment (it ends up in
// storage paths and keys): letters, digits, '-' and '_', at most 63.
var projectID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func checkProjectID(field, id string) error {
	switch {
	case id == "":
		return errs.Invalidf("%s is required", field)
	case len(id) > 63:
		return errs.Invalidf("%s %q is longer than 63 characters", field, id)
	case !projectID.MatchString(id):
		return errs.Invalidf("%s %q may only contain letters, digits, '-' and '_'", field, id)
	}
	return nil
}

func checkOrg(field, org string) error {
	if org == "" {
		return nil
	}
	return checkProjectID(field, org)
}

// maxDescription bounds a project description (the reference schema's
// column holds 300 characters).
const maxDescription = 300

// fromProto validates a Create/Update request's project and converts it.
func (s *ProjectService) fromProto(ctx context.Context, p *project.Project) (*store.Project, error) {
	if p == nil {
		return nil, errs.Invalidf("project is required")
	}
	if err := checkProjectID("project.id", p.GetId()); err != nil {
		return nil, err
	}
	if err := checkOrg("project.org", p.GetOrg()); err != nil {
		return nil, err
	}
	if n := utf8.RuneCountInString(p.GetDescription()); n > maxDescription {
		return nil, errs.Invalidf("project.description is %d characters long; at most %d are allowed", n, maxDescription)
	}
	if _, ok := project.ProjectState_name[int32(p.GetState())]; !ok {
		return nil, errs.Invalidf("project.state %d is not a project state", p.GetState())
	}
	if len(p.GetDomains()) > 0 {
		known, err := s.st.Projects.Domains(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range p.GetDomains() {
			if !hasDomain(known, d.GetId()) {
				return nil, errs.Invalidf("project.domains: %q is not a domain of this manager; domains are global and cannot be set per project", d.GetId())
			}
		}
	}
	display := p.GetName()
	if display == "" {
		display = p.GetId()
	}
	return &store.Project{
		Org:         p.GetOrg(),
		Name:        p.GetId(),
		DisplayName: display,
		Description: p.GetDescription(),
		Labels:      p.GetLabels().GetValues(),
		State:       store.ProjectState(p.GetState()),
	}, nil
}

func hasDomain(ds []store.Domain, id string) bool {
	for _, d := range ds {
		if d.ID == id {
			return true
		}
	}
	return false
}

func projectProto(p *store.Project, domains []store.Domain) *project.Project {
	out := &project.Project{
		Id:          p.Name,
		Name:        p.DisplayName,
		Description: p.Description,
		State:       project.ProjectState(p.State),
		Org:         p.Org,
		Domains:     make([]*project.Domain, len(domains)),
	}
	if out.Name == "" {
		out.Name = p.Name
	}
	if len(p.Labels) > 0 {
		out.Labels = &task.Labels{Values: p.Labels}
	}
	for i, d := range domains {
		out.Domains[i] = &project.Domain{Id: d.ID, Name: d.Name}
	}
	return out
}

// CreateProject creates a project; an existing id is AlreadyExists.
func (s *ProjectService) CreateProject(ctx context.Context, req *connect.Request[project.CreateProjectRequest]) (*connect.Response[project.CreateProjectResponse], error) {
	p, err := s.fromProto(ctx, req.Msg.GetProject())
	if err != nil {
		return nil, err
	}
	err = s.st.Projects.Create(ctx, p)
	if errors.Is(err, errs.ErrAlreadyExists) {
		return nil, fmt.Errorf("project %q already exists: %w", p.Name, errs.ErrAlreadyExists)
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "project created", "org", p.Org, "project", p.Name)
	return connect.NewResponse(&project.CreateProjectResponse{}), nil
}

// UpdateProject replaces a project's name, description, labels and state
// (the SDK sends the whole project, read back and modified).
func (s *ProjectService) UpdateProject(ctx context.Context, req *connect.Request[project.UpdateProjectRequest]) (*connect.Response[project.UpdateProjectResponse], error) {
	p, err := s.fromProto(ctx, req.Msg.GetProject())
	if err != nil {
		return nil, err
	}
	err = s.st.Projects.Update(ctx, p)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("project %q not found", p.Name)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&project.UpdateProjectResponse{}), nil
}

// GetProject returns one project.
func (s *ProjectService) GetProject(ctx context.Context, req *connect.Request[project.GetProjectRequest]) (*connect.Response[project.GetProjectResponse], error) {
	id, org := req.Msg.GetId(), req.Msg.GetOrg()
	if err := checkProjectID("id", id); err != nil {
		return nil, err
	}
	if err := checkOrg("org", org); err != nil {
		return nil, err
	}
	p, err := s.st.Projects.Get(ctx, org, id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("project %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	domains, err := s.st.Projects.Domains(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&project.GetProjectResponse{Project: projectProto(p, domains)}), nil
}

// ListProjects lists the projects of an org by name.
func (s *ProjectService) ListProjects(ctx context.Context, req *connect.Request[project.ListProjectsRequest]) (*connect.Response[project.ListProjectsResponse], error) {
	f, page, err := listreq.ParseProjects(req.Msg)
	if err != nil {
		return nil, err
	}
	if err := checkOrg("org", f.Org); err != nil {
		return nil, err
	}
	rows, next, err := s.st.Projects.List(ctx, f, page)
	if err != nil {
		return nil, err
	}
	domains, err := s.st.Projects.Domains(ctx)
	if err != nil {
		return nil, err
	}
	out := &project.Projects{Token: next, Projects: make([]*project.Project, len(rows))}
	for i := range rows {
		out.Projects[i] = projectProto(&rows[i], domains)
	}
	return connect.NewResponse(&project.ListProjectsResponse{Projects: out}), nil
}
