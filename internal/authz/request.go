package authz

import (
	"google.golang.org/protobuf/proto"

	"fmgr.dev/internal/authn"
)

// AllowedRequest reports whether bindings allow procedure's action on
// everything m names: the project and domain Scope finds, and the project
// and domain of every run identifier in it (RunsNamed). Scope alone takes
// the first project it meets, so a request could name a project and domain
// the caller holds in one field (an Enqueue's run_spec.related_to, say)
// and act on a run of another domain in another (its action_id.run): each
// run named must be allowed too. project and domain are what a denial
// names.
func AllowedRequest(bindings []authn.Binding, procedure string, a Action, m proto.Message) (project, domain string, ok bool) {
	project, domain, _ = Scope(m)
	if !Allowed(bindings, procedure, a, project, domain) {
		return project, domain, false
	}
	if m == nil {
		return project, domain, true
	}
	for _, r := range RunsNamed(m) {
		if r.Project == "" {
			continue // names no project: nothing a service finds
		}
		if !Allowed(bindings, procedure, a, r.Project, r.Domain) {
			return r.Project, r.Domain, false
		}
	}
	return project, domain, true
}
