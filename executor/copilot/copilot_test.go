package copilot

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/runlayout"
)

func openStore(t *testing.T) *blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), "file://"+filepath.ToSlash(filepath.Join(t.TempDir(), "blobs")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func intLit(v int64) *core.Literal {
	return primitive(&core.Primitive{Value: &core.Primitive_Integer{Integer: v}})
}

func strLit(v string) *core.Literal {
	return primitive(&core.Primitive{Value: &core.Primitive_StringValue{StringValue: v}})
}

func fileLit(uri string) *core.Literal {
	return scalar(&core.Scalar{Value: &core.Scalar_Blob{Blob: &core.Blob{Uri: uri,
		Metadata: &core.BlobMetadata{Type: &core.BlobType{Dimensionality: core.BlobType_SINGLE}}}}})
}

func simple(t core.SimpleType) *core.LiteralType {
	return &core.LiteralType{Type: &core.LiteralType_Simple{Simple: t}}
}

func template(layout core.DataLoadingConfig_FileInputLayout, outputs map[string]*core.LiteralType) *core.TaskTemplate {
	var vars []*core.VariableEntry
	for k, v := range outputs {
		vars = append(vars, &core.VariableEntry{Key: k, Value: &core.Variable{Type: v}})
	}
	return &core.TaskTemplate{
		Type:      "raw-container",
		Interface: &core.TypedInterface{Outputs: &core.VariableMap{Variables: vars}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "alpine:3", DataConfig: &core.DataLoadingConfig{
			Enabled: true, InputPath: "/var/inputs", OutputPath: "/var/outputs", FileInputLayout: layout}}},
	}
}

func withContainer(c *core.Container) *core.TaskTemplate {
	return &core.TaskTemplate{Target: &core.TaskTemplate_Container{Container: c}}
}

func inputs(kv ...any) *task.Inputs {
	in := &task.Inputs{}
	for i := 0; i < len(kv); i += 2 {
		in.Literals = append(in.Literals, &task.NamedLiteral{Name: kv[i].(string), Value: kv[i+1].(*core.Literal)})
	}
	return in
}

func TestIsRaw(t *testing.T) {
	if !IsRaw(template(core.DataLoadingConfig_DIRECT, nil)) {
		t.Error("a template with an enabled data config is not raw")
	}
	if IsRaw(withContainer(&core.Container{Args: []string{"a0"}})) {
		t.Error("a Python task is raw")
	}
}

func TestNewJobRejectsBadDirectories(t *testing.T) {
	for _, dc := range []*core.DataLoadingConfig{
		{Enabled: true, InputPath: "var/inputs"},
		{Enabled: true, InputPath: "/"},
		{Enabled: true, InputPath: "/data", OutputPath: "/data/out"},
	} {
		tmpl := withContainer(&core.Container{DataConfig: dc})
		if _, err := NewJob(tmpl, nil); err == nil {
			t.Errorf("data config %v accepted", dc)
		}
	}
	j, err := NewJob(withContainer(&core.Container{DataConfig: &core.DataLoadingConfig{Enabled: true}}), nil)
	if err != nil || j.InputDir != DefaultInputDir || j.OutputDir != DefaultOutputDir {
		t.Errorf("defaults: %+v %v", j, err)
	}
}

func TestRender(t *testing.T) {
	j, err := NewJob(template(core.DataLoadingConfig_NAMED_DIR, nil), inputs(
		"a", intLit(3), "s", strLit("hi there"),
		"b", primitive(&core.Primitive{Value: &core.Primitive_Boolean{Boolean: true}}),
		"f", fileLit("/store/x/genome.fasta")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Render([]string{"sh", "-c", "echo {{.inputs.a}} {{ .Inputs.s }} {{.inputs.b}} {{.inputs.f}} {{.outputPrefix}}"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "echo 3 hi there true /var/inputs/f/genome.fasta {{.outputPrefix}}"; got[2] != want {
		t.Errorf("rendered %q, want %q", got[2], want)
	}
	if _, err := j.Render([]string{"{{.inputs.nope}}"}); err == nil || !strings.Contains(err.Error(), `no input "nope"`) {
		t.Errorf("unknown input: %v", err)
	}
}

func TestDownloadLaysOutInputs(t *testing.T) {
	ctx := context.Background()
	blobs := openStore(t)
	if err := blobs.Put(ctx, "run/a/genome.fasta", []byte(">seq\nACGT\n"), nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run/d/one.txt", "run/d/sub/two.txt"} {
		if err := blobs.Put(ctx, k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	dirLit := scalar(&core.Scalar{Value: &core.Scalar_Blob{Blob: &core.Blob{Uri: blobs.URI("run/d"),
		Metadata: &core.BlobMetadata{Type: &core.BlobType{Dimensionality: core.BlobType_MULTIPART}}}}})
	list := &core.Literal{Value: &core.Literal_Collection{Collection: &core.LiteralCollection{Literals: []*core.Literal{intLit(1), intLit(2)}}}}
	in := inputs("n", intLit(42), "s", strLit("x y"), "fasta", fileLit(blobs.URI("run/a/genome.fasta")), "d", dirLit, "l", list)

	for _, layout := range []core.DataLoadingConfig_FileInputLayout{core.DataLoadingConfig_DIRECT, core.DataLoadingConfig_NAMED_DIR} {
		j, err := NewJob(template(layout, nil), in)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "in")
		if err := j.Download(ctx, blobs, dir); err != nil {
			t.Fatal(err)
		}
		fasta := "fasta"
		if layout == core.DataLoadingConfig_NAMED_DIR {
			fasta = "fasta/genome.fasta"
		}
		for rel, want := range map[string]string{
			"n": "42", "s": "x y", fasta: ">seq\nACGT\n", "d/one.txt": "run/d/one.txt",
			"d/sub/two.txt": "run/d/sub/two.txt", "l/0": "1", "l/1": "2",
		} {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil || string(b) != want {
				t.Errorf("%s: %s: %q %v, want %q", layout, rel, b, err, want)
			}
		}
		var lm core.LiteralMap
		b, err := os.ReadFile(filepath.Join(dir, InputsProto))
		if err != nil || proto.Unmarshal(b, &lm) != nil || lm.GetLiterals()["n"].GetScalar().GetPrimitive().GetInteger() != 42 {
			t.Errorf("inputs.pb: %v %v", &lm, err)
		}
		var meta map[string]any
		b, err = os.ReadFile(filepath.Join(dir, InputsJSON))
		if err != nil || json.Unmarshal(b, &meta) != nil || meta["n"] != float64(42) || meta["fasta"] != "/var/inputs/"+fasta {
			t.Errorf("inputs.json: %s %v", b, err)
		}
	}

	// The YAML format writes inputs.yaml instead of inputs.json.
	yj, _ := NewJob(template(core.DataLoadingConfig_DIRECT, nil), inputs("count", intLit(42)))
	yj.Format = core.DataLoadingConfig_YAML
	ydir := t.TempDir()
	if err := yj.Download(ctx, blobs, ydir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ydir, InputsYAML)); err != nil || string(b) != "count: 42\n" {
		t.Errorf("inputs.yaml: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ydir, InputsJSON)); err == nil {
		t.Error("inputs.json written for the YAML format")
	}

	// A file on the host outside storage: only for a driver that allows it.
	hostFile := filepath.Join(t.TempDir(), "local.txt")
	if err := os.WriteFile(hostFile, []byte("on the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, _ := NewJob(template(core.DataLoadingConfig_DIRECT, nil), inputs("f", fileLit("file://"+hostFile)))
	if err := j.Download(ctx, blobs, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not in the manager's storage") {
		t.Errorf("a file outside storage: %v", err)
	}
	j.HostFiles = true
	dir := t.TempDir()
	if err := j.Download(ctx, blobs, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "on the host" {
		t.Errorf("a host file input: %q %v", b, err)
	}
}

// readResult returns the outputs or the error document Collect wrote.
func readResult(t *testing.T, blobs *blob.Store, prefix string) (*task.Outputs, *core.ContainerError) {
	t.Helper()
	ctx := context.Background()
	if b, err := blobs.Get(ctx, prefix+"/"+runlayout.ErrorFile); err == nil {
		var doc core.ErrorDocument
		if err := proto.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return nil, doc.GetError()
	}
	b, err := blobs.Get(ctx, prefix+"/"+runlayout.OutputsFile)
	if err != nil {
		t.Fatalf("neither outputs nor an error: %v", err)
	}
	var outs task.Outputs
	if err := proto.Unmarshal(b, &outs); err != nil {
		t.Fatal(err)
	}
	return &outs, nil
}

func TestCollect(t *testing.T) {
	ctx := context.Background()
	blobs := openStore(t)
	fileType := &core.LiteralType{Type: &core.LiteralType_Blob{Blob: &core.BlobType{Dimensionality: core.BlobType_SINGLE}}}
	tmpl := template(core.DataLoadingConfig_DIRECT, map[string]*core.LiteralType{
		"sum": simple(core.SimpleType_INTEGER), "msg": simple(core.SimpleType_STRING),
		"ok": simple(core.SimpleType_BOOLEAN), "report": fileType,
	})
	j, err := NewJob(tmpl, nil)
	if err != nil {
		t.Fatal(err)
	}
	write := func(dir, name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	write(dir, "sum", "7\n")
	write(dir, "msg", "three plus four\n")
	write(dir, "ok", "True")
	write(dir, "report", "a report")
	if err := j.Collect(ctx, blobs, dir, blobs.URI("run/a/1")); err != nil {
		t.Fatal(err)
	}
	outs, cerr := readResult(t, blobs, "run/a/1")
	if cerr != nil {
		t.Fatalf("error document %v", cerr)
	}
	got := map[string]*core.Literal{}
	for _, nl := range outs.GetLiterals() {
		got[nl.GetName()] = nl.GetValue()
	}
	if got["sum"].GetScalar().GetPrimitive().GetInteger() != 7 || got["msg"].GetScalar().GetPrimitive().GetStringValue() != "three plus four" ||
		!got["ok"].GetScalar().GetPrimitive().GetBoolean() {
		t.Errorf("scalar outputs %v", outs)
	}
	key, err := blobs.Key(got["report"].GetScalar().GetBlob().GetUri())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := blobs.Get(ctx, key); err != nil || string(b) != "a report" {
		t.Errorf("the file output in storage: %q %v", b, err)
	}

	for _, tc := range []struct {
		name, code, want string
		setup            func(dir string)
	}{
		{"missing", CodeOutputMissing, `did not write its output "sum": expected /var/outputs/sum`, func(dir string) {
			write(dir, "msg", "m")
			write(dir, "ok", "false")
			write(dir, "report", "r")
		}},
		{"unparsable", CodeBadOutput, "output /var/outputs/sum is not a valid integer", func(dir string) {
			write(dir, "sum", "seven")
			write(dir, "msg", "m")
			write(dir, "ok", "false")
			write(dir, "report", "r")
		}},
		{"reported", CodeUserError, "reported an error in /var/outputs/_ERROR: disk on fire", func(dir string) {
			write(dir, ErrorFile, "disk on fire\n")
		}},
	} {
		dir := t.TempDir()
		tc.setup(dir)
		prefix := "run/" + tc.name + "/1"
		if err := j.Collect(ctx, blobs, dir, blobs.URI(prefix)); err != nil {
			t.Fatal(err)
		}
		outs, cerr := readResult(t, blobs, prefix)
		if outs != nil || cerr.GetCode() != tc.code || !strings.Contains(cerr.GetMessage(), tc.want) ||
			cerr.GetOrigin() != core.ExecutionError_USER {
			t.Errorf("%s: outputs %v, error %v; want %s %q", tc.name, outs, cerr, tc.code, tc.want)
		}
	}
}

// A command that leaves a symbolic link out of its output directory, as an
// output or as an output directory's entry, gets a user error, and nothing
// of the host's file reaches storage; a link that stays inside is read.
func TestCollectRefusesLinksOutOfTheOutputDir(t *testing.T) {
	ctx := context.Background()
	blobs := openStore(t)
	fileType := &core.LiteralType{Type: &core.LiteralType_Blob{Blob: &core.BlobType{Dimensionality: core.BlobType_SINGLE}}}
	dirType := &core.LiteralType{Type: &core.LiteralType_Blob{Blob: &core.BlobType{Dimensionality: core.BlobType_MULTIPART}}}
	host := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(host, []byte("the host's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		typ    *core.LiteralType
		target string
	}{
		{"scalar-absolute", simple(core.SimpleType_STRING), host},
		{"file-absolute", fileType, host},
		{"file-relative", fileType, "../../../../../../../../../.." + host},
		{"dir-absolute", dirType, filepath.Dir(host)},
	} {
		j, err := NewJob(template(core.DataLoadingConfig_DIRECT, map[string]*core.LiteralType{"out": tc.typ}), nil)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.Symlink(tc.target, filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
		prefix := "run/" + tc.name + "/1"
		if err := j.Collect(ctx, blobs, dir, blobs.URI(prefix)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		outs, cerr := readResult(t, blobs, prefix)
		if outs != nil || cerr.GetCode() != CodeBadOutput || !strings.Contains(cerr.GetMessage(), "leads out of the output directory") {
			t.Errorf("%s: outputs %v, error %v; want %s saying the link leads out", tc.name, outs, cerr, CodeBadOutput)
		}
		for _, k := range []string{prefix + "/" + dataDir + "/out", prefix + "/" + dataDir + "/out/host-secret"} {
			if b, err := blobs.Get(ctx, k); err == nil {
				t.Errorf("%s: the host's file reached storage at %s: %q", tc.name, k, b)
			}
		}
	}

	// Inside the output directory a link is fine.
	j, err := NewJob(template(core.DataLoadingConfig_DIRECT, map[string]*core.LiteralType{"out": simple(core.SimpleType_STRING)}), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "real"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := j.Collect(ctx, blobs, dir, blobs.URI("run/inside/1")); err != nil {
		t.Fatal(err)
	}
	if outs, cerr := readResult(t, blobs, "run/inside/1"); cerr != nil || outs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetStringValue() != "inside" {
		t.Errorf("a link inside the output directory: %v %v", outs, cerr)
	}
}

// With HostRoot, host files are copied from below it only, and not through
// a symbolic link that leads out of it.
func TestDownloadHostFilesOnlyBelowHostRoot(t *testing.T) {
	ctx := context.Background()
	blobs := openStore(t)
	work, elsewhere := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(work, "mine.txt"), filepath.Join(elsewhere, "secret.txt")} {
		if err := os.WriteFile(f, []byte(filepath.Base(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(elsewhere, "secret.txt"), filepath.Join(work, "link.txt")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string // want "" = refused
	}{
		{filepath.Join(work, "mine.txt"), "mine.txt"},
		{filepath.Join(elsewhere, "secret.txt"), ""},
		{filepath.Join(work, "link.txt"), ""},
		{work + "/../" + filepath.Base(elsewhere) + "/secret.txt", ""},
	} {
		j, _ := NewJob(template(core.DataLoadingConfig_DIRECT, nil), inputs("f", fileLit("file://"+tc.path)))
		j.HostFiles, j.HostRoot = true, work
		dir := t.TempDir()
		err := j.Download(ctx, blobs, dir)
		b, _ := os.ReadFile(filepath.Join(dir, "f"))
		switch {
		case tc.want == "" && (err == nil || strings.Contains(string(b), "secret")):
			t.Errorf("%s: copied (%q, %v), want refused", tc.path, b, err)
		case tc.want != "" && (err != nil || string(b) != tc.want):
			t.Errorf("%s: %q %v, want %q", tc.path, b, err, tc.want)
		}
	}
}
