package runstate_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// withBundle is spec(name) loading the code bundle at uri as the SDK
// names it in the runtime's args (option --tgz or --pkl).
func withBundle(name, option, uri string) *task.TaskSpec {
	sp := spec(name)
	c := sp.GetTaskTemplate().GetContainer()
	c.Args = append(c.Args, option, uri, "--dest", ".")
	return sp
}

// TestCreateRunRefusesAMissingCodeBundle: a run whose task loads a code
// bundle that this manager's storage does not hold (its data directory was
// wiped after the SDK uploaded it, and the SDK's client cache still names
// it) is refused with FailedPrecondition naming the bundle and the cache,
// whether the spec comes inline or from a deployed task, and nothing is
// created. A bundle elsewhere is not this manager's to check.
func TestCreateRunRefusesAMissingCodeBundle(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		blobs := e.state.Blobs()
		const tgzKey, pklKey = "uploads/_/p/development/abc/fastabc.tar.gz", "uploads/_/p/development/def/task.pkl.gz"
		for _, k := range []string{tgzKey, pklKey} {
			if err := blobs.Put(ctx, k, []byte("bundle"), nil); err != nil {
				t.Fatal(err)
			}
		}
		tgz, pkl := withBundle("env.main", "--tgz", blobs.URI(tgzKey)), withBundle("env.pickled", "--pkl", blobs.URI(pklKey))
		raw, err := proto.Marshal(tgz)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.st.Tasks.Deploy(ctx, store.Task{TaskID: store.TaskID{Project: "p", Domain: "development", Name: "env.main", Version: "v1"},
			SpecDigest: store.SpecDigest(raw)}, raw); err != nil {
			t.Fatal(err)
		}
		deployed := &workflow.CreateRunRequest_TaskId{TaskId: &task.TaskIdentifier{Project: "p", Domain: "development", Name: "env.main", Version: "v1"}}
		// Inline inputs are stored by content: x differs per run, so a
		// refused run that stored its inputs would show in storage.
		x := int64(0)
		create := func(name string, tk any) error {
			x++
			req := &workflow.CreateRunRequest{Id: &workflow.CreateRunRequest_RunId{RunId: runID(name)}, InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: intInputs(x)}}
			switch tk := tk.(type) {
			case *task.TaskSpec:
				req.Task = &workflow.CreateRunRequest_TaskSpec{TaskSpec: tk}
			case *workflow.CreateRunRequest_TaskId:
				req.Task = tk
			}
			_, err := e.state.CreateRun(ctx, req)
			return err
		}
		for name, tk := range map[string]any{"rtgz": tgz, "rpkl": pkl, "rdeployed": deployed} {
			if err := create(name, tk); err != nil {
				t.Fatalf("run %s with its bundle in storage: %v", name, err)
			}
		}
		// A bundle outside this manager's storage is not checked.
		if err := create("relsewhere", withBundle("env.main", "--tgz", "s3://elsewhere/fast.tar.gz")); err != nil {
			t.Fatalf("run with a bundle elsewhere: %v", err)
		}
		submitted := len(e.exec.submitted)

		// The data directory is wiped: the bundles are gone.
		for _, k := range []string{tgzKey, pklKey} {
			if err := blobs.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		objects := storeSnapshot(t, blobs)
		for _, tc := range []struct {
			run  string
			task any
			says []string
		}{
			{"rtgz2", tgz, []string{"task_spec names the code bundle " + blobs.URI(tgzKey) + " (--tgz)", "and run it again"}},
			{"rpkl2", pkl, []string{"task_spec names the code bundle " + blobs.URI(pklKey) + " (--pkl)"}},
			{"rdeployed2", deployed, []string{"task env.main version v1 (as deployed) names the code bundle " + blobs.URI(tgzKey), "deploy the task again"}},
		} {
			err := create(tc.run, tc.task)
			if codeOf(err) != connect.CodeFailedPrecondition {
				t.Fatalf("run %s without its bundle: %v, want FailedPrecondition", tc.run, err)
			}
			for _, want := range append(tc.says, "does not exist in this manager's storage", ".flyte/local-cache/cache.db", "`flyte delete local-cache`") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("run %s: message %q does not say %q", tc.run, err, want)
				}
			}
			if _, err := e.st.Actions.Get(ctx, store.RunKey{Project: "p", Domain: "development", RunName: tc.run}.Action(store.RootName)); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("the refused run %s exists: %v", tc.run, err)
			}
		}
		if after := storeSnapshot(t, blobs); !maps.Equal(after, objects) {
			t.Errorf("refused runs changed storage:\nbefore %q\nafter  %q", objects, after)
		}
		if len(e.exec.submitted) != submitted {
			t.Errorf("executor told %v, want no refused run", e.exec.submitted[submitted:])
		}
	})
}
