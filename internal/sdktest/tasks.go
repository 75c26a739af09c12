package sdktest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/runlayout"
)

// Task is a task the SDK prepared (PrepareTasks): its TaskSpec as a remote
// run sends it, and the directory of its inputs.pb.
type Task struct {
	Spec     *task.TaskSpec
	InputDir string
}

// Inputs reads the task's inputs.pb.
func (tk Task) Inputs(t testing.TB) *task.Inputs {
	t.Helper()
	in := &task.Inputs{}
	readProto(t, filepath.Join(tk.InputDir, runlayout.InputsFile), in)
	return in
}

// PrepareTasks runs script with the virtualenv's interpreter to have the
// real SDK pack and serialise tasks into workdir, and returns them by name.
// The script takes --workdir DIR and args, and prints a JSON index
// {"tasks": {name: {"spec": path of the TaskSpec, "input_dir": dir of its
// inputs.pb}}} on stdout (executor/local/process/testdata/sdk_task.py).
func PrepareTasks(t testing.TB, script, workdir string, args ...string) map[string]Task {
	t.Helper()
	prep := exec.Command(Python(t), append([]string{script, "--workdir", workdir}, args...)...)
	var stderr bytes.Buffer
	prep.Stderr = &stderr
	out, err := prep.Output()
	if err != nil {
		t.Fatalf("preparing tasks with the SDK: %v\n%s", err, stderr.String())
	}
	var index struct {
		Tasks map[string]struct {
			Spec     string `json:"spec"`
			InputDir string `json:"input_dir"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(out, &index); err != nil {
		t.Fatalf("index %q: %v", out, err)
	}
	tasks := make(map[string]Task, len(index.Tasks))
	for name, e := range index.Tasks {
		spec := &task.TaskSpec{}
		readProto(t, e.Spec, spec)
		tasks[name] = Task{Spec: spec, InputDir: e.InputDir}
	}
	return tasks
}

func readProto(t testing.TB, path string, m proto.Message) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
}
