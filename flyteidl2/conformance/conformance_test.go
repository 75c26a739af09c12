// Package conformance checks that our flyteidl2 protos are wire- and
// JSON-compatible with the official ones that the pinned flyte SDK uses.
package conformance

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// schema indexes one side's definitions by full name.
type schema struct {
	messages map[string]*descriptorpb.DescriptorProto
	enums    map[string]*descriptorpb.EnumDescriptorProto
	services map[string]*descriptorpb.ServiceDescriptorProto
}

func newSchema() *schema {
	return &schema{
		messages: map[string]*descriptorpb.DescriptorProto{},
		enums:    map[string]*descriptorpb.EnumDescriptorProto{},
		services: map[string]*descriptorpb.ServiceDescriptorProto{},
	}
}

func (s *schema) addFile(fd *descriptorpb.FileDescriptorProto) {
	pkg := fd.GetPackage()
	for _, m := range fd.GetMessageType() {
		s.addMessage(pkg, m)
	}
	for _, e := range fd.GetEnumType() {
		s.enums[pkg+"."+e.GetName()] = e
	}
	for _, svc := range fd.GetService() {
		s.services[pkg+"."+svc.GetName()] = svc
	}
}

func (s *schema) addMessage(scope string, m *descriptorpb.DescriptorProto) {
	name := scope + "." + m.GetName()
	s.messages[name] = m
	for _, n := range m.GetNestedType() {
		s.addMessage(name, n)
	}
	for _, e := range m.GetEnumType() {
		s.enums[name+"."+e.GetName()] = e
	}
}

// ours is everything under flyteidl2/ that our generated Go registered.
func ours() *schema {
	s := newSchema()
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(fd.Path(), "flyteidl2/") {
			s.addFile(protodesc.ToFileDescriptorProto(fd))
		}
		return true
	})
	return s
}

func official(t *testing.T) *schema {
	s := newSchema()
	for _, fd := range loadOfficial(t) {
		s.addFile(fd)
	}
	return s
}

// fieldFacts is everything about a field that the binary or JSON wire format
// depends on, rendered for a readable diff.
func fieldFacts(m *descriptorpb.DescriptorProto, f *descriptorpb.FieldDescriptorProto) string {
	oneof := "-"
	if f.OneofIndex != nil && !f.GetProto3Optional() {
		oneof = m.GetOneofDecl()[f.GetOneofIndex()].GetName()
	}
	json := f.GetJsonName()
	if json == "" {
		json = jsonCamel(f.GetName())
	}
	typ := strings.TrimPrefix(f.GetType().String(), "TYPE_")
	if f.GetTypeName() != "" {
		typ = strings.TrimPrefix(f.GetTypeName(), ".")
	}
	label := strings.TrimPrefix(f.GetLabel().String(), "LABEL_")
	if isMap(m, f) {
		label = "MAP"
	}
	return fmt.Sprintf("name=%s json=%s type=%s label=%s oneof=%s optional=%v",
		f.GetName(), json, typ, label, oneof, f.GetProto3Optional())
}

func jsonCamel(name string) string {
	var b strings.Builder
	upper := false
	for _, c := range name {
		switch {
		case c == '_':
			upper = true
		case upper:
			b.WriteString(strings.ToUpper(string(c)))
			upper = false
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

func isMap(m *descriptorpb.DescriptorProto, f *descriptorpb.FieldDescriptorProto) bool {
	if f.GetType() != descriptorpb.FieldDescriptorProto_TYPE_MESSAGE {
		return false
	}
	for _, n := range m.GetNestedType() {
		if n.GetOptions().GetMapEntry() && strings.HasSuffix(f.GetTypeName(), "."+n.GetName()) {
			return true
		}
	}
	return false
}

func byNumber(m *descriptorpb.DescriptorProto) map[int32]*descriptorpb.FieldDescriptorProto {
	out := map[int32]*descriptorpb.FieldDescriptorProto{}
	for _, f := range m.GetField() {
		out[f.GetNumber()] = f
	}
	return out
}

func methodFacts(m *descriptorpb.MethodDescriptorProto) string {
	return fmt.Sprintf("%s(%s%s) returns (%s%s)", m.GetName(),
		streamWord(m.GetClientStreaming()), strings.TrimPrefix(m.GetInputType(), "."),
		streamWord(m.GetServerStreaming()), strings.TrimPrefix(m.GetOutputType(), "."))
}

func streamWord(stream bool) string {
	if stream {
		return "stream "
	}
	return ""
}

// TestWireConformance compares every message, enum and service we define
// with the official definition of the same full name.
func TestWireConformance(t *testing.T) {
	theirs, mine := official(t), ours()
	if len(mine.messages) == 0 {
		t.Fatal("no flyteidl2 descriptors registered: the generated packages are not linked into this test")
	}
	var diffs []string
	report := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	for name, m := range mine.messages {
		o, ok := theirs.messages[name]
		if !ok {
			report("message %s: not in the official schema", name)
			continue
		}
		official := byNumber(o)
		for _, f := range m.GetField() {
			of, ok := official[f.GetNumber()]
			if !ok {
				report("%s #%d: official has no field with this number (we have %s)", name, f.GetNumber(), fieldFacts(m, f))
				continue
			}
			if got, want := fieldFacts(m, f), fieldFacts(o, of); got != want {
				report("%s #%d:\n    ours:     %s\n    official: %s", name, f.GetNumber(), got, want)
			}
		}
	}
	for name, e := range mine.enums {
		o, ok := theirs.enums[name]
		if !ok {
			report("enum %s: not in the official schema", name)
			continue
		}
		if got, want := enumFacts(e), enumFacts(o); got != want {
			report("enum %s:\n    ours:     %s\n    official: %s", name, got, want)
		}
	}
	for name, s := range mine.services {
		o, ok := theirs.services[name]
		if !ok {
			report("service %s: not in the official schema", name)
			continue
		}
		if got, want := serviceFacts(s), serviceFacts(o); got != want {
			report("service %s:\n    ours:     %s\n    official: %s", name, got, want)
		}
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Error(d)
	}
	t.Logf("compared %d messages, %d enums, %d services", len(mine.messages), len(mine.enums), len(mine.services))
}

func enumFacts(e *descriptorpb.EnumDescriptorProto) string {
	var parts []string
	for _, v := range e.GetValue() {
		parts = append(parts, fmt.Sprintf("%s=%d", v.GetName(), v.GetNumber()))
	}
	return strings.Join(parts, " ")
}

func serviceFacts(s *descriptorpb.ServiceDescriptorProto) string {
	var parts []string
	for _, m := range s.GetMethod() {
		parts = append(parts, methodFacts(m))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// coreServices are the services whose reachable fields must be at least 90%
// defined by us: everything the SDK's run, deploy and fan-out paths touch.
var coreServices = []string{
	"flyteidl2.workflow.RunService",
	"flyteidl2.task.TaskService",
	"flyteidl2.actions.ActionsService",
	"flyteidl2.dataproxy.DataProxyService",
	"flyteidl2.cluster.ClusterService",
	"flyteidl2.workflow.EventsProxyService",
}

// TestCoverage prints how many official fields reachable from the core
// services we define, and fails below 90%. Every listed service must exist.
func TestCoverage(t *testing.T) {
	theirs, mine := official(t), ours()
	seen := map[string]bool{}
	var queue []string
	push := func(typeName string) {
		name := strings.TrimPrefix(typeName, ".")
		if _, ok := theirs.messages[name]; ok && !seen[name] {
			seen[name] = true
			queue = append(queue, name)
		}
	}
	for _, svc := range coreServices {
		s, ok := theirs.services[svc]
		if !ok {
			t.Fatalf("official schema has no %s", svc)
		}
		if _, ok := mine.services[svc]; !ok {
			t.Errorf("we do not define %s", svc)
		}
		for _, m := range s.GetMethod() {
			push(m.GetInputType())
			push(m.GetOutputType())
		}
	}
	total, defined := 0, 0
	var missing []string
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		o := theirs.messages[name]
		var have map[int32]*descriptorpb.FieldDescriptorProto
		if m, ok := mine.messages[name]; ok {
			have = byNumber(m)
		}
		for _, f := range o.GetField() {
			push(f.GetTypeName())
			if o.GetOptions().GetMapEntry() {
				continue // counted through the map field itself
			}
			total++
			if _, ok := have[f.GetNumber()]; ok {
				defined++
			} else {
				missing = append(missing, fmt.Sprintf("%s.%s", name, f.GetName()))
			}
		}
	}
	pct := 100 * float64(defined) / float64(total)
	t.Logf("coverage: %d of %d official fields reachable from %d core services are defined (%.1f%%)",
		defined, total, len(coreServices), pct)
	fmt.Printf("flyteidl2 coverage: %d/%d fields (%.1f%%) reachable from the core services\n", defined, total, pct)
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Logf("not defined: %s", strings.Join(missing, ", "))
	}
	if pct < 90 {
		t.Fatalf("coverage %.1f%% is below 90%%", pct)
	}
}
