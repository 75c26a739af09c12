package cache

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/sdktest"
)

// sdkKey asks the pinned SDK for the cache key of tmpl and inputs, as its
// controller computes the key of a child action.
const sdkKey = `
import sys
from flyteidl2.core import tasks_pb2
from flyteidl2.task import common_pb2
from flyte._internal.runtime import convert
t = tasks_pb2.TaskTemplate(); t.ParseFromString(open(sys.argv[1], "rb").read())
i = common_pb2.Inputs(); i.ParseFromString(open(sys.argv[2], "rb").read())
ignored = list(t.metadata.cache_ignore_input_vars)
print(convert.generate_cache_key_hash(t.id.name, convert.generate_inputs_hash_from_proto(i),
      t.interface, t.metadata.discovery_version, ignored, i))
`

func intLit(v int64) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: v}}}}}}
}

func strLit(v string) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: v}}}}}}
}

func variable(t core.SimpleType) *core.Variable {
	return &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: t}}, Description: "d"}
}

// TestKeyMatchesSDK: the key the manager computes for a root action is the
// one the SDK sends for the same call as a child, for plain, nested,
// pre-hashed and ignored inputs.
func TestKeyMatchesSDK(t *testing.T) {
	py := sdktest.Python(t)
	tmpl := &core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "d", Name: "env.square", Version: "v1"},
		Metadata: &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "abc123"},
		Interface: &core.TypedInterface{
			Inputs: &core.VariableMap{Variables: []*core.VariableEntry{
				{Key: "x", Value: variable(core.SimpleType_INTEGER)}, {Key: "name", Value: variable(core.SimpleType_STRING)},
				{Key: "items", Value: variable(core.SimpleType_STRUCT)}}},
			Outputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "o0", Value: variable(core.SimpleType_INTEGER)}}},
		},
	}
	nested := &core.Literal{Value: &core.Literal_Map{Map: &core.LiteralMap{Literals: map[string]*core.Literal{
		"b": intLit(2), "a": {Value: &core.Literal_Collection{Collection: &core.LiteralCollection{Literals: []*core.Literal{intLit(1), {Hash: "h1"}}}}},
	}}}}
	inputs := &task.Inputs{Literals: []*task.NamedLiteral{{Name: "x", Value: intLit(7)}, {Name: "name", Value: strLit("héllo")}, {Name: "items", Value: nested}}}
	cases := map[string]func(){
		"plain":   func() {},
		"ignored": func() { tmpl.Metadata.CacheIgnoreInputVars = []string{"name"} },
		"none":    func() { tmpl.Metadata.CacheIgnoreInputVars = []string{"name", "x", "items"} },
		"hashed": func() {
			tmpl.Metadata.CacheIgnoreInputVars = nil
			inputs.Literals[0].Value = &core.Literal{Hash: "precomputed"}
		},
	}
	for _, name := range []string{"plain", "ignored", "none", "hashed"} {
		cases[name]()
		dir := t.TempDir()
		write := func(f string, m proto.Message) string {
			b, _ := proto.Marshal(m)
			p := filepath.Join(dir, f)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		out, err := exec.Command(py, "-c", sdkKey, write("t.pb", tmpl), write("i.pb", inputs)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: sdk: %v\n%s", name, err, out)
		}
		want := strings.TrimSpace(string(out))
		if got := Key(tmpl, inputs); got != want {
			t.Errorf("%s: Key = %q, the SDK computes %q", name, got, want)
		}
	}
}
