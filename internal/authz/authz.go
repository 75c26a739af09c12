// Package authz decides what an authenticated caller may do: roles
// (viewer, contributor, admin) bound to a project and domain ("*" for
// any), the action every routed procedure needs (Procedures), and the
// project and domain its request names (Scope).
package authz

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"fmgr.dev/internal/authn"
)

// Action is what a procedure does, in increasing privilege.
type Action int

// Actions.
const (
	// View reads runs, tasks, projects, logs and data.
	View Action = iota + 1
	// Execute creates, aborts and feeds runs and actions (and what their
	// tasks call: cache, state, events).
	Execute
	// Register deploys tasks, triggers and apps and manages a project's
	// secrets.
	Register
	// Admin creates and updates projects.
	Admin
)

func (a Action) String() string {
	switch a {
	case View:
		return "view"
	case Execute:
		return "execute"
	case Register:
		return "register"
	case Admin:
		return "administer"
	}
	return "?"
}

// Roles and the highest action each allows.
var roleMax = map[string]Action{"viewer": View, "contributor": Register, "admin": Admin}

// Any is the wildcard project or domain of a binding.
const Any = "*"

func matches(pattern, value string) bool { return pattern == Any || pattern == value }

// Allowed reports whether bindings allow procedure's action on
// project/domain. An empty project is a request that names none (an
// org-wide list): it needs a binding on every project and domain, except
// for the procedures in Unscoped, which need the action anywhere.
func Allowed(bindings []authn.Binding, procedure string, a Action, project, domain string) bool {
	for _, b := range bindings {
		if roleMax[b.Role] < a {
			continue
		}
		if project == "" {
			if Unscoped[procedure] || Filtered[procedure] || (b.Project == Any && b.Domain == Any) {
				return true
			}
			continue
		}
		if matches(b.Project, project) && (domain == "" || matches(b.Domain, domain)) {
			if domain == "" && b.Domain != Any && a != View {
				continue // a project-wide change needs every domain
			}
			return true
		}
	}
	return false
}

// projectIdentifier names its project "name" (RunIdentifier and the
// others name it "project").
const projectIdentifier = "flyteidl2.common.ProjectIdentifier"

// maxScopeDepth bounds how deep Scope looks into nested messages.
const maxScopeDepth = 4

// Scope is the project and domain a request names: the first message, in
// breadth-first order over singular message fields, with a non-empty
// string field "project" (and its "domain" beside it, "" when none).
// ok is false when the request names no project.
func Scope(m proto.Message) (project, domain string, ok bool) {
	if m == nil {
		return "", "", false
	}
	level := []protoreflect.Message{m.ProtoReflect()}
	for depth := 0; depth < maxScopeDepth && len(level) > 0; depth++ {
		var next []protoreflect.Message
		for _, msg := range level {
			fields := msg.Descriptor().Fields()
			if msg.Descriptor().FullName() == projectIdentifier {
				if p := stringField(msg, fields.ByName("name")); p != "" {
					return p, stringField(msg, fields.ByName("domain")), true
				}
			}
			if p := stringField(msg, fields.ByName("project")); p != "" {
				return p, stringField(msg, fields.ByName("domain")), true
			}
			for i := range fields.Len() {
				f := fields.Get(i)
				if f.Kind() == protoreflect.MessageKind && !f.IsList() && !f.IsMap() && msg.Has(f) {
					next = append(next, msg.Get(f).Message())
				}
			}
		}
		level = next
	}
	return "", "", false
}

func stringField(msg protoreflect.Message, f protoreflect.FieldDescriptor) string {
	if f == nil || f.Kind() != protoreflect.StringKind || f.IsList() {
		return ""
	}
	return msg.Get(f).String()
}

// projectMessage is a project, whose "id" is its name.
const projectMessage = "flyteidl2.project.Project"

// ItemScope is the project and domain of one item of a list answer: a
// project's own id, else what Scope finds.
func ItemScope(m protoreflect.Message) (project, domain string, ok bool) {
	if m.Descriptor().FullName() == projectMessage {
		id := stringField(m, m.Descriptor().Fields().ByName("id"))
		return id, "", id != ""
	}
	return Scope(m.Interface())
}
