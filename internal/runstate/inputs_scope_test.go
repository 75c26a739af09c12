package runstate_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/store"
)

// TestOffloadedInputsStayInTheirProject: a run starts only from inputs
// uploaded for its own project and domain. Another project's uploaded
// inputs, wherever they were put (the default place or a base_dir, even
// one inside this project's data), are refused with InvalidArgument and
// create nothing; the project's own inputs start the run.
func TestOffloadedInputsStayInTheirProject(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		upload := func(project, baseDir string) string {
			t.Helper()
			up, err := e.state.WriteInputs(ctx, &dataproxy.UploadInputsRequest{
				Id:      &dataproxy.UploadInputsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: project, Domain: "development"}},
				Inputs:  intInputs(42),
				BaseDir: baseDir,
			})
			if err != nil {
				t.Fatal(err)
			}
			return up.GetUri()
		}
		create := func(project, name, uri string) error {
			_, err := e.state.CreateRun(ctx, &workflow.CreateRunRequest{
				Id:           &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: project, Domain: "development", Name: name}},
				Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
				InputWrapper: &workflow.CreateRunRequest_OffloadedInputData{OffloadedInputData: &common.OffloadedInputData{Uri: uri}},
			})
			return err
		}
		mineBase := e.state.Blobs().URI("shared/mine")
		theirs := []string{
			upload("victim", ""),
			upload("victim", e.state.Blobs().URI("shared")),
			upload("victim", mineBase), // the victim's inputs under a prefix of the attacker's choosing
		}
		for i, uri := range theirs {
			for _, u := range []string{uri, uri + "/inputs.pb"} {
				err := create("attacker", "r"+string(rune('a'+i)), u)
				if codeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "not inputs uploaded for project attacker") {
					t.Fatalf("a run of attacker from %s: %v; want InvalidArgument", u, err)
				}
			}
		}
		// Nor a path that merely looks like inputs.
		if err := create("attacker", "rz", e.state.Blobs().URI("runs/_/victim/development")); codeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("a run from another project's run directory: %v", err)
		}
		if runs, _, err := e.state.ListRuns(ctx, store.RunFilter{Project: "attacker", Domain: "development"}, store.Page{}); err != nil || len(runs) != 0 {
			t.Fatalf("refused runs were created: %v, %v", runs, err)
		}

		for i, uri := range []string{upload("attacker", ""), upload("attacker", mineBase), upload("attacker", e.state.Blobs().URI("shared"))} {
			if !strings.Contains(uri, "/offloaded-inputs/_/attacker/development/") {
				t.Fatalf("inputs uploaded to %s, not below the project's scope", uri)
			}
			if err := create("attacker", "ok"+string(rune('a'+i)), uri); err != nil {
				t.Fatalf("a run from its own project's inputs at %s: %v", uri, err)
			}
		}
	})
}
