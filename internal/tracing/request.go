package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"fmgr.dev/internal/authz"
)

const (
	runIdentifier    = "flyteidl2.common.RunIdentifier"
	actionIdentifier = "flyteidl2.common.ActionIdentifier"
	// maxDepth bounds how deep RequestAttributes looks, as authz.Scope does.
	maxDepth = 4
)

// RequestAttributes are what a request names: its project and domain (as
// authorization reads them, authz.Scope) and the run and action of the
// first run or action identifier in it. Only names: never a payload.
func RequestAttributes(m proto.Message) []attribute.KeyValue {
	if m == nil {
		return nil
	}
	var attrs []attribute.KeyValue
	if project, domain, ok := authz.Scope(m); ok {
		attrs = append(attrs, AttrProject.String(project))
		if domain != "" {
			attrs = append(attrs, AttrDomain.String(domain))
		}
	}
	run, action := runAndAction(m.ProtoReflect())
	if run != "" {
		attrs = append(attrs, AttrRun.String(run))
	}
	if action != "" {
		attrs = append(attrs, AttrAction.String(action))
	}
	return attrs
}

// runAndAction finds, breadth first over singular message fields, the
// first ActionIdentifier (its run's name and its name) or RunIdentifier
// (its name) with a name set.
func runAndAction(m protoreflect.Message) (run, action string) {
	level := []protoreflect.Message{m}
	for depth := 0; depth < maxDepth && len(level) > 0; depth++ {
		var next []protoreflect.Message
		for _, msg := range level {
			d := msg.Descriptor()
			switch d.FullName() {
			case actionIdentifier:
				a := nameOf(msg)
				var r string
				if f := d.Fields().ByName("run"); f != nil && msg.Has(f) {
					r = nameOf(msg.Get(f).Message())
				}
				if a != "" || r != "" {
					return r, a
				}
			case runIdentifier:
				if r := nameOf(msg); r != "" {
					return r, ""
				}
			}
			fields := d.Fields()
			for i := range fields.Len() {
				f := fields.Get(i)
				if f.Kind() == protoreflect.MessageKind && !f.IsList() && !f.IsMap() && msg.Has(f) {
					next = append(next, msg.Get(f).Message())
				}
			}
		}
		level = next
	}
	return "", ""
}

func nameOf(msg protoreflect.Message) string {
	f := msg.Descriptor().Fields().ByName("name")
	if f == nil || f.Kind() != protoreflect.StringKind || f.IsList() {
		return ""
	}
	return msg.Get(f).String()
}
