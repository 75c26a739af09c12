package launchform_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/runs/launchform"
)

// sdkForms runs testdata/sdk_forms.py with the real SDK.
func sdkForms(t *testing.T, mode string, stdin []byte) []byte {
	t.Helper()
	cmd := exec.Command(sdktest.Python(t), filepath.Join("testdata", "sdk_forms.py"), mode)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk_forms.py %s: %v\n%s", mode, err, stderr.String())
	}
	return out
}

func b64proto(t *testing.T, s string, m proto.Message) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(raw, m); err != nil {
		t.Fatal(err)
	}
}

// throughJSON sends s the way a browser does (Connect JSON) and back.
func throughJSON(t *testing.T, s *structpb.Struct) *structpb.Struct {
	t.Helper()
	b, err := protojson.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	out := &structpb.Struct{}
	if err := protojson.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The SDK's own TaskSpec and literals of every kind of input: the form
// describes each input; its values, edited as JSON, become literals again
// that the SDK turns back into the values it started from, by both paths
// (JSON values with the interface, and the filled form alone).
func TestRoundTripWithTheSDK(t *testing.T) {
	var made struct {
		Spec   string            `json:"spec"`
		Inputs map[string]string `json:"inputs"`
	}
	if err := json.Unmarshal(sdkForms(t, "make", nil), &made); err != nil {
		t.Fatal(err)
	}
	spec := &task.TaskSpec{}
	b64proto(t, made.Spec, spec)
	vars := spec.GetTaskTemplate().GetInterface().GetInputs()
	var literals []*task.NamedLiteral
	for name, s := range made.Inputs {
		l := &core.Literal{}
		b64proto(t, s, l)
		literals = append(literals, &task.NamedLiteral{Name: name, Value: l})
	}

	form, err := launchform.TaskForm(spec)
	if err != nil {
		t.Fatal(err)
	}
	fm := throughJSON(t, form).AsMap()
	props := fm["properties"].(map[string]any)
	var required []string
	for _, r := range fm["required"].([]any) {
		required = append(required, r.(string))
	}
	slices.Sort(required)
	if len(props) != len(made.Inputs) || slices.Contains(required, "n") || slices.Contains(required, "maybe") || !slices.Contains(required, "i") {
		t.Fatalf("form has %d properties (want %d), required %v (want all but n, greeting, maybe)", len(props), len(made.Inputs), required)
	}
	want := map[string]string{"i": "integer", "f": "number", "s": "string", "b": "boolean", "when": "string", "wait": "string",
		"nums": "array", "scores": "object", "point": "object", "model": "object", "color": "string", "doc": "object", "folder": "object"}
	for name, typ := range want {
		if got := props[name].(map[string]any)["type"]; got != typ {
			t.Errorf("%s: type %v, want %s", name, got, typ)
		}
	}
	if p := props["n"].(map[string]any); p["default"] != float64(7) {
		t.Errorf("n: default %v, want 7 (the task's)", p["default"])
	}
	if p := props["point"].(map[string]any); p["dataclass"] != "Point" {
		t.Errorf("point: %v, want the dataclass's schema", p)
	}
	if p := props["doc"].(map[string]any); p["format"] != "blob" {
		t.Errorf("doc: %v, want a blob", p)
	}

	// Path 1: each literal shown as a JSON value, then back with the interface.
	values := map[string]any{}
	for _, l := range literals {
		v, err := launchform.Value(l.GetValue())
		if err != nil {
			t.Fatalf("%s: %v", l.GetName(), err)
		}
		values[l.GetName()] = v
	}
	vs, err := structpb.NewStruct(values)
	if err != nil {
		t.Fatal(err)
	}
	fromValues, err := launchform.Literals(vars, throughJSON(t, vs).AsMap())
	if err != nil {
		t.Fatal(err)
	}
	sdkAgrees(t, "JSON values", fromValues, len(made.Inputs))

	// Path 2: the form filled with the literals (a relaunch), then back
	// from the form alone.
	filled, err := launchform.LiteralsForm(vars, literals)
	if err != nil {
		t.Fatal(err)
	}
	fromForm, err := launchform.FormLiterals(throughJSON(t, filled).AsMap())
	if err != nil {
		t.Fatal(err)
	}
	sdkAgrees(t, "filled form", fromForm, len(made.Inputs))

	// A value that does not fit is refused, naming its input.
	values["i"] = "forty-two"
	if _, err := launchform.Literals(vars, values); err == nil || !strings.Contains(err.Error(), `"i"`) {
		t.Fatalf("a string for an int: %v, want an error naming i", err)
	}
	delete(values, "i")
	if _, err := launchform.Literals(vars, values); err == nil || !strings.Contains(err.Error(), `"i"`) {
		t.Fatalf("a missing required input: %v, want an error naming i", err)
	}
	delete(values, "maybe") // optional: None when left out
	values["i"] = float64(1)
	if _, err := launchform.Literals(vars, values); err != nil {
		t.Fatalf("a missing optional input: %v", err)
	}
}

// sdkAgrees has the SDK turn literals back into Python values and fails
// on every one that differs from the sample it was made from.
func sdkAgrees(t *testing.T, path string, literals []*task.NamedLiteral, want int) {
	t.Helper()
	in := map[string]string{}
	for _, l := range literals {
		raw, err := proto.Marshal(l.GetValue())
		if err != nil {
			t.Fatal(err)
		}
		in[l.GetName()] = base64.StdEncoding.EncodeToString(raw)
	}
	if len(in) != want {
		t.Fatalf("%s: %d literals, want %d", path, len(in), want)
	}
	b, _ := json.Marshal(in)
	var verdict map[string]string
	if err := json.Unmarshal(sdkForms(t, "check", b), &verdict); err != nil {
		t.Fatal(err)
	}
	for name, v := range verdict {
		if v != "ok" {
			t.Errorf("%s: input %s: %s", path, name, v)
		}
	}
}
