package runstate_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"path"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// storeSnapshot is every object in the blob store, by key.
func storeSnapshot(t *testing.T, s *blob.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for o, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = string(b)
	}
	return out
}

func intInputs(v int64) *task.Inputs {
	return &task.Inputs{Literals: []*task.NamedLiteral{{Name: "x", Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: v}}}}}}}}}
}

// codeOf is the Connect code the server answers for err; 0 for success.
func codeOf(err error) connect.Code {
	if err == nil {
		return 0
	}
	cerr, _ := errs.ToConnect(err)
	return cerr.Code()
}

// TestDuplicateCreateRunChangesNothing: CreateRun for an existing run name
// is AlreadyExists and leaves the first run's inputs, outputs and rows as
// they were (its retries must read its own inputs, not the second caller's).
func TestDuplicateCreateRunChangesNothing(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		run := createRun(t, e, "dup") // inputs x=7
		key := store.RunKey{Project: "p", Domain: "development", RunName: "dup"}
		root, err := e.st.Actions.Get(ctx, key.Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		// The first attempt has finished and written its outputs.
		blobs := e.state.Blobs()
		base, err := blobs.Key(root.RunOutputBase)
		if err != nil {
			t.Fatal(err)
		}
		if err := blobs.Put(ctx, path.Join(base, "a0", "1", "outputs.pb"), []byte("first run's outputs"), nil); err != nil {
			t.Fatal(err)
		}
		objects := storeSnapshot(t, blobs)
		details, err := e.state.RunDetails(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if root, err = e.st.Actions.Get(ctx, key.Action(store.RootName)); err != nil {
			t.Fatal(err)
		}

		for _, req := range []*workflow.CreateRunRequest{
			{ // the same request again, as a client retry would send it
				Id:           &workflow.CreateRunRequest_RunId{RunId: runID("dup")},
				Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
				InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: intInputs(7)},
			},
			{ // another caller's run under the same name
				Id:           &workflow.CreateRunRequest_RunId{RunId: runID("dup")},
				Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.other")},
				InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: intInputs(8)},
			},
		} {
			_, err := e.state.CreateRun(ctx, req)
			if !errors.Is(err, errs.ErrAlreadyExists) {
				t.Fatalf("duplicate CreateRun = %v, want ErrAlreadyExists", err)
			}
			if after := storeSnapshot(t, blobs); !maps.Equal(after, objects) {
				t.Fatalf("a rejected CreateRun changed storage:\nbefore %q\nafter  %q", objects, after)
			}
		}
		again, err := e.st.Actions.Get(ctx, key.Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, root) {
			t.Fatalf("root row changed:\nbefore %+v\nafter  %+v", root, again)
		}
		detailsAfter, err := e.state.RunDetails(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(details, detailsAfter) {
			t.Fatalf("run details changed:\nbefore %v\nafter  %v", details, detailsAfter)
		}
		data, err := e.state.Data(ctx, run.GetAction().GetId())
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Inputs.GetLiterals()[0].GetValue().GetScalar().GetPrimitive().GetInteger(); got != 7 {
			t.Fatalf("the first run now reads input x = %d, want its own 7", got)
		}
		if len(e.exec.submitted) != 1 {
			t.Fatalf("executor told %v, want only the first run", e.exec.submitted)
		}
	})
}

// TestCreateRunInputsOutsideTheRun: inline inputs are stored by content,
// outside the run's prefix, and two runs with the same inputs share them.
func TestCreateRunInputsOutsideTheRun(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		createRun(t, e, "s1")
		createRun(t, e, "s2")
		var dirs []string
		for _, name := range []string{"s1", "s2"} {
			a, err := e.st.Actions.Get(ctx, store.RunKey{Project: "p", Domain: "development", RunName: name}.Action(store.RootName))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(a.InputURI, a.RunOutputBase+"/") {
				t.Fatalf("run %s keeps its inputs under its own prefix: %s", name, a.InputURI)
			}
			dirs = append(dirs, a.InputURI)
		}
		if dirs[0] != dirs[1] {
			t.Fatalf("equal inputs stored twice: %s, %s", dirs[0], dirs[1])
		}
		// UploadInputs of the same inputs names the same place.
		up, err := e.state.WriteInputs(ctx, &dataproxy.UploadInputsRequest{
			Id:     &dataproxy.UploadInputsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "development"}},
			Inputs: intInputs(7),
		})
		if err != nil || up.GetUri() != dirs[0] {
			t.Fatalf("UploadInputs = %v, %v; want %s", up, err, dirs[0])
		}
	})
}

// TestNewWorkAdmission: CreateRun and UploadInputs follow the same rule as
// DeployTask (store.Projects.AdmitWork): an archived project is
// FailedPrecondition, an unknown domain InvalidArgument listing the
// domains, an unknown project without projects.autoCreate NotFound; and a
// refused request writes nothing, not even the project.
func TestNewWorkAdmission(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		p, _, err := e.st.Projects.EnsureExists(ctx, "", "attic")
		if err != nil {
			t.Fatal(err)
		}
		p.State = store.ProjectArchived
		if err := e.st.Projects.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		noAutoCreate, _ := runstate.New(e.st, e.state.Blobs(), e.state.Hub(), config.Projects{}, slog.New(slog.NewTextHandler(io.Discard, nil)), runstate.NoExecutor)

		inProject := func(project, domain string) *common.ProjectIdentifier {
			return &common.ProjectIdentifier{Name: project, Domain: domain}
		}
		createIn := func(s *runstate.Service, id *common.ProjectIdentifier) error {
			_, err := s.CreateRun(ctx, &workflow.CreateRunRequest{
				Id:           &workflow.CreateRunRequest_ProjectId{ProjectId: id},
				Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
				InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: intInputs(1)},
			})
			return err
		}
		uploadIn := func(s *runstate.Service, id *common.ProjectIdentifier) error {
			_, err := s.WriteInputs(ctx, &dataproxy.UploadInputsRequest{
				Id:     &dataproxy.UploadInputsRequest_ProjectId{ProjectId: id},
				Inputs: intInputs(1),
			})
			return err
		}
		for _, tc := range []struct {
			name  string
			state *runstate.Service
			id    *common.ProjectIdentifier
			code  connect.Code
			says  []string
		}{
			{"archived project", e.state, inProject("attic", "development"), connect.CodeFailedPrecondition, []string{`project "attic" is archived`}},
			{"unknown domain", e.state, inProject("fresh", "qa"), connect.CodeInvalidArgument, []string{`project_id.domain "qa"`, "development", "staging", "production"}},
			{"unknown project", noAutoCreate, inProject("fresh", "development"), connect.CodeNotFound, []string{`project "fresh" does not exist`, "projects.autoCreate"}},
		} {
			for call, do := range map[string]func(*runstate.Service, *common.ProjectIdentifier) error{"CreateRun": createIn, "UploadInputs": uploadIn} {
				err := do(tc.state, tc.id)
				if err == nil || codeOf(err) != tc.code {
					t.Fatalf("%s, %s: %v, want %v", tc.name, call, err, tc.code)
				}
				for _, want := range tc.says {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("%s, %s: message %q does not say %q", tc.name, call, err.Error(), want)
					}
				}
			}
		}
		// A run_id names its domain field as such.
		_, err = e.state.CreateRun(ctx, &workflow.CreateRunRequest{
			Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "qa", Name: "r"}},
			Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
		})
		if codeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `run_id.domain "qa"`) {
			t.Fatalf("unknown domain in run_id: %v", err)
		}

		if objects := storeSnapshot(t, e.state.Blobs()); len(objects) != 0 {
			t.Fatalf("refused requests wrote %q", objects)
		}
		if _, err := e.st.Projects.Get(ctx, "", "fresh"); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("a refused request created project fresh: %v", err)
		}
		for _, project := range []string{"attic", "fresh"} {
			runs, _, err := e.state.ListRuns(ctx, store.RunFilter{Project: project, Domain: "development"}, store.Page{})
			if err != nil || len(runs) != 0 {
				t.Fatalf("runs in %s: %d, %v; want none", project, len(runs), err)
			}
		}
		if len(e.exec.submitted) != 0 {
			t.Fatalf("executor told %v, want nothing", e.exec.submitted)
		}
		// Unarchived, the project takes work again.
		p.State = store.ProjectActive
		if err := e.st.Projects.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := createIn(e.state, inProject("attic", "development")); err != nil {
			t.Fatalf("CreateRun in the unarchived project: %v", err)
		}
	})
}

// TestStorageLocationsEndingInDot: a location whose key has a segment
// ending in '.' is refused naming the request field, and nothing is written.
func TestStorageLocationsEndingInDot(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		blobs := e.state.Blobs()
		_, err := e.state.CreateRun(ctx, &workflow.CreateRunRequest{
			Id:           &workflow.CreateRunRequest_RunId{RunId: runID("dots")},
			Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
			RunSpec:      &task.RunSpec{RunBaseDir: blobs.URI("runs/x../base")},
			InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: intInputs(1)},
		})
		if codeOf(err) != connect.CodeInvalidArgument || !strings.HasPrefix(err.Error(), "run_spec.run_base_dir: ") ||
			!strings.Contains(err.Error(), "ending in '.'") {
			t.Fatalf("run_base_dir with x..: %v, want InvalidArgument naming run_spec.run_base_dir and the reason", err)
		}
		_, err = e.state.WriteInputs(ctx, &dataproxy.UploadInputsRequest{
			Id:      &dataproxy.UploadInputsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "development"}},
			Inputs:  intInputs(1),
			BaseDir: blobs.URI("inputs/x."),
		})
		if codeOf(err) != connect.CodeInvalidArgument || !strings.HasPrefix(err.Error(), "base_dir: ") {
			t.Fatalf("base_dir with x.: %v, want InvalidArgument naming base_dir", err)
		}
		if objects := storeSnapshot(t, blobs); len(objects) != 0 {
			t.Fatalf("refused requests wrote %q", objects)
		}
		if _, err := e.st.Actions.Get(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "dots"}.Action(store.RootName)); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("the refused run exists: %v", err)
		}
	})
}

// A run's storage is its own: a requested run_base_dir is a prefix under
// which each run gets <org>/<project>/<domain>/<run>, and the spec keeps the
// prefix as sent, so a rerun (which copies its source's spec) never writes
// into its source's outputs.
func TestRunBaseDirIsAPrefixNeverShared(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		prefix := e.state.Blobs().URI("custom")
		create := func(name string, rs *task.RunSpec) *store.Action {
			t.Helper()
			if _, err := e.state.CreateRun(ctx, &workflow.CreateRunRequest{
				Id:           &workflow.CreateRunRequest_RunId{RunId: runID(name)},
				Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
				RunSpec:      rs,
				InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: intInputs(1)},
			}); err != nil {
				t.Fatalf("CreateRun %s: %v", name, err)
			}
			root, err := e.st.Actions.Get(ctx, store.RunKey{Project: "p", Domain: "development", RunName: name}.Action(store.RootName))
			if err != nil {
				t.Fatal(err)
			}
			return root
		}
		source := create("rsource", &task.RunSpec{RunBaseDir: prefix + "/"})
		if want := prefix + "/_/p/development/rsource"; source.RunOutputBase != want {
			t.Fatalf("source base %q, want %q", source.RunOutputBase, want)
		}
		d, err := e.state.RunDetails(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "rsource"})
		if err != nil {
			t.Fatal(err)
		}
		if d.GetRunSpec().GetRunBaseDir() != prefix+"/" {
			t.Fatalf("the source's spec says run_base_dir %q, want the prefix as sent", d.GetRunSpec().GetRunBaseDir())
		}
		// What flyte.rerun sends: the source's spec, copied.
		rerun := create("rrerun", proto.Clone(d.GetRunSpec()).(*task.RunSpec))
		if want := prefix + "/_/p/development/rrerun"; rerun.RunOutputBase != want {
			t.Fatalf("rerun base %q, want %q (never the source's %q)", rerun.RunOutputBase, want, source.RunOutputBase)
		}
		if plain := create("rplain", nil); strings.HasPrefix(plain.RunOutputBase, prefix) || !strings.HasSuffix(plain.RunOutputBase, "/runs/_/p/development/rplain") {
			t.Fatalf("a run without run_base_dir has base %q, want the default layout", plain.RunOutputBase)
		}
	})
}
