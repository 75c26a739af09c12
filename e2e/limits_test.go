package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
)

// smallRequestLimit is the server.maxRequestBytes the request-limit tests
// start the manager with.
const (
	smallRequestLimit    = 1 << 20
	smallRequestLimitEnv = "FLYTE_MANAGER_SERVER_MAXREQUESTBYTES=1048576"
)

func runClient(m *manager, opts ...connect.ClientOption) workflowconnect.RunServiceClient {
	return workflowconnect.NewRunServiceClient(rpcClient, m.URL, opts...)
}

func projectID() *common.ProjectIdentifier {
	return &common.ProjectIdentifier{Name: testProject, Domain: testDomain}
}

// stringInputs is a task.Inputs with one string input "s" of n bytes.
func stringInputs(n int) *task.Inputs {
	return &task.Inputs{Literals: []*task.NamedLiteral{{
		Name: "s",
		Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
			Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: strings.Repeat("x", n)}},
		}}}},
	}}}
}

// createRunWithInputs is a CreateRun of a (not deployed) task with inputs.
func createRunWithInputs(in *task.Inputs) *workflow.CreateRunRequest {
	return &workflow.CreateRunRequest{
		Id: &workflow.CreateRunRequest_ProjectId{ProjectId: projectID()},
		Task: &workflow.CreateRunRequest_TaskId{TaskId: &task.TaskIdentifier{
			Project: testProject, Domain: testDomain, Name: "e2e_missing.nothing", Version: "v1",
		}},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: in},
	}
}

// connectCode is err's Connect code, or "ok" / "not a Connect error: ...".
func connectCode(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code().String()
	}
	return "not a Connect error: " + err.Error()
}

// TestOversizedRequestRejected sends requests bigger than the manager's
// server.maxRequestBytes: plain, gzip-compressed (as the Python SDK sends
// them; the limit applies to the decompressed size) and to the data proxy,
// where the SDK's run inputs go. Each is refused with ResourceExhausted and a
// message that states the limit, and a request under the limit is not.
func TestOversizedRequestRejected(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			m := startManager(t, b.dsn(t), smallRequestLimitEnv)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			big := stringInputs(2 * smallRequestLimit)
			dp := dataproxyconnect.NewDataProxyServiceClient(rpcClient, m.URL)

			for _, c := range []struct {
				name string
				call func() error
			}{
				{"CreateRun", func() error {
					_, err := runClient(m).CreateRun(ctx, connect.NewRequest(createRunWithInputs(big)))
					return err
				}},
				{"CreateRun gzip", func() error {
					_, err := runClient(m, connect.WithSendGzip()).CreateRun(ctx, connect.NewRequest(createRunWithInputs(big)))
					return err
				}},
				{"UploadInputs", func() error {
					_, err := dp.UploadInputs(ctx, connect.NewRequest(&dataproxy.UploadInputsRequest{
						Id:     &dataproxy.UploadInputsRequest_ProjectId{ProjectId: projectID()},
						Inputs: big,
					}))
					return err
				}},
			} {
				err := c.call()
				if code := connectCode(err); code != connect.CodeResourceExhausted.String() {
					t.Errorf("%s with a %d-byte input: %s (%v), want resource_exhausted", c.name, 2*smallRequestLimit, code, err)
					continue
				}
				msg := err.(*connect.Error).Message()
				if !strings.Contains(msg, "1048576") {
					t.Errorf("%s: message %q does not state the limit (1048576 bytes)", c.name, msg)
				}
				t.Logf("%s: resource_exhausted: %s", c.name, msg)
			}

			_, err := runClient(m).CreateRun(ctx, connect.NewRequest(createRunWithInputs(stringInputs(smallRequestLimit/2))))
			if connectCode(err) == connect.CodeResourceExhausted.String() {
				t.Errorf("CreateRun of half the limit refused as too large: %v", err)
			}
		})
	}
}
