package server

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/authz"
)

// List answers are filtered to what the caller may see (authz.Filtered):
// a list that names no project is allowed to anyone with the action on
// some project, and its items (runs, projects, tasks, apps, triggers,
// secrets) on projects the caller has no role on are dropped, in unary
// answers and in every message of a watch stream.

// maxFilterDepth bounds how deep filterItems looks for the repeated field
// holding the items (ListProjectsResponse nests them in Projects).
const maxFilterDepth = 2

// filterAnswer drops from msg the items the caller of ctx may not see
// through procedure. It reports false when msg itself is one item (a
// watch event) the caller may not see: the caller must not get it.
func filterAnswer(ctx context.Context, procedure string, msg any) bool {
	if !authz.Filtered[procedure] {
		return true
	}
	p, ok := authn.FromContext(ctx)
	if !ok {
		return true
	}
	m, ok := msg.(proto.Message)
	if !ok || m == nil {
		return true
	}
	action := authz.Procedures[procedure]
	visible := func(item protoreflect.Message) bool {
		project, domain, named := authz.ItemScope(item)
		if !named {
			// An item of no project (an org-wide secret): only for a
			// role on every project.
			return authz.Allowed(p.Bindings, "", action, "", "")
		}
		return authz.Allowed(p.Bindings, procedure, action, project, domain)
	}
	r := m.ProtoReflect()
	if !filterItems(r, visible, 0) {
		// No list in it: the message is one event about one item.
		if _, _, named := authz.ItemScope(r); named {
			return visible(r)
		}
	}
	return true
}

// filterItems removes the items visible refuses from every repeated
// message field of m (to maxFilterDepth); it reports whether it found one.
func filterItems(m protoreflect.Message, visible func(protoreflect.Message) bool, depth int) bool {
	found := false
	m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Kind() != protoreflect.MessageKind || f.IsMap() {
			return true
		}
		if !f.IsList() {
			if depth < maxFilterDepth && filterItems(v.Message(), visible, depth+1) {
				found = true
			}
			return true
		}
		found = true
		l := v.List()
		kept := 0
		for i := range l.Len() {
			if item := l.Get(i); visible(item.Message()) {
				l.Set(kept, item)
				kept++
			}
		}
		l.Truncate(kept)
		return true
	})
	return found
}

// Send filters every message a watch stream sends.
func (c *authorizedConn) Send(msg any) error {
	if !filterAnswer(c.ctx, c.Spec().Procedure, msg) {
		return nil
	}
	return c.StreamingHandlerConn.Send(msg)
}

var _ connect.StreamingHandlerConn = (*authorizedConn)(nil)
