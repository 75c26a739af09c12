package contract

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/phase"
)

func outputsOf(t *testing.T, names ...string) []byte {
	t.Helper()
	out := &task.Outputs{}
	for _, n := range names {
		out.Literals = append(out.Literals, &task.NamedLiteral{Name: n, Value: &core.Literal{Value: &core.Literal_Scalar{
			Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: strings.Repeat("v", 40)}}}}}}})
	}
	b, err := proto.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The end of an attempt is read from the files it left: complete outputs or
// a readable error document mean the task ended, however the process died
// afterwards; without them a death is the task's own crash, and an attempt
// nobody watched is lost (an orphan).
func TestClassifyFiles(t *testing.T) {
	two := outputsOf(t, "o0", "o1")
	doc := errorDoc(t, "ValueError", "boom", core.ContainerError_RECOVERABLE, core.ExecutionError_USER)
	abrt := Exit{Code: -1, Signal: "aborted"}
	lost := Exit{Unobserved: true}
	names := []string{"o0", "o1"}
	cases := []struct {
		name    string
		exit    Exit
		f       Files
		outcome Outcome
		kind    machine.ErrorKind
		warning string // "" means none
	}{
		{"SIGABRT after complete outputs", abrt, Files{Outputs: two, OutputNames: names}, Succeeded, 0, "killed by signal aborted"},
		{"exit 1 after complete outputs", Exit{Code: 1}, Files{Outputs: two, OutputNames: names}, Succeeded, 0, "exited with code 1"},
		{"clean success", Exit{}, Files{Outputs: two, OutputNames: names}, Succeeded, 0, ""},
		{"no-output task, empty file", Exit{}, Files{Outputs: []byte{}}, Succeeded, 0, ""},
		{"SIGABRT with truncated outputs", abrt, Files{Outputs: two[:len(two)-5], OutputNames: names}, Crashed, machine.KindUser, ""},
		{"SIGABRT with an output missing", abrt, Files{Outputs: outputsOf(t, "o0"), OutputNames: names}, Crashed, machine.KindUser, ""},
		{"exit 0 with truncated outputs", Exit{}, Files{Outputs: two[:len(two)-5], OutputNames: names}, Failed, machine.KindUser, ""},
		{"SIGABRT after the error file", abrt, Files{ErrorDoc: doc}, Failed, machine.KindUser, "wrote error.pb and then was killed by signal aborted"},
		{"SIGABRT with a torn error file", abrt, Files{ErrorDoc: doc[:len(doc)-3]}, Failed, machine.KindUser, ""},
		{"exit 1 without files", Exit{Code: 1}, Files{}, Crashed, machine.KindUser, ""},
		{"orphan with complete outputs", lost, Files{Outputs: two, OutputNames: names}, Succeeded, 0, "while no manager watched it"},
		{"orphan with an error file", lost, Files{ErrorDoc: doc}, Failed, machine.KindUser, "while no manager watched it"},
		{"orphan with truncated outputs", lost, Files{Outputs: two[:len(two)-5], OutputNames: names}, Lost, 0, ""},
		{"orphan with a torn error file", lost, Files{ErrorDoc: doc[:len(doc)-3]}, Lost, 0, ""},
		{"orphan without files", lost, Files{}, Lost, 0, ""},
		{"abort wins over outputs", Exit{Signal: "terminated", Aborted: true}, Files{Outputs: two}, Aborted, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ClassifyFiles(tc.exit, tc.f)
			if r.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s (%+v)", r.Outcome, tc.outcome, r.Error)
			}
			if tc.kind != 0 && (r.Error == nil || r.Error.Kind != tc.kind) {
				t.Errorf("error %+v, want kind %s", r.Error, tc.kind)
			}
			if (tc.warning == "") != (r.Warning == "") || !strings.Contains(r.Warning, tc.warning) {
				t.Errorf("warning %q, want one containing %q", r.Warning, tc.warning)
			}
		})
	}
	if ev := ClassifyFiles(lost, Files{}).Event(3); ev != (machine.Orphaned{Attempt: 3}) {
		t.Errorf("a lost attempt's event is %#v", ev)
	}
}

// A crash is the task's failure: it is paid from the task's own retries, so
// retries=0 ends the action at the first crash even with system retries left.
func TestCrashUsesTheTaskRetries(t *testing.T) {
	r := ClassifyFiles(Exit{Code: 1}, Files{})
	p := machine.Policy{MaxUserRetries: 0, MaxSystemRetries: 3}
	_, d, err := machine.Transition(machine.State{Phase: phase.Running, Attempt: 1}, r.Event(1), p)
	if term, ok := d.(*machine.Terminal); err != nil || !ok || term.Phase != phase.Failed || term.Error.Kind != machine.KindUser {
		t.Fatalf("crash with retries=0: %v %v", d, err)
	}
}
