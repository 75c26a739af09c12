package images

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/store"
)

// The built-in task the SDK's remote builder runs (flyte-sdk
// remote_builder.py): it finds it by name in project system, domain
// production, latest version, and runs it in the user's project with the
// inputs spec (the URI of an uploaded ImageSpec), context (the URI of an
// uploaded gzipped tarball, or "") and target_image (name:tag); it reads
// the fully qualified image name from the first output.
const (
	TaskProject = "system"
	TaskDomain  = "production"
	TaskName    = "build-image"
	// TaskType marks the task for the executor, which builds instead of
	// starting a process of the task's own.
	TaskType = "flyte-manager-image-build"

	InputSpec    = "spec"
	InputContext = "context"
	InputTarget  = "target_image"
	OutputFQIN   = "fqin"

	// buildTimeout bounds a build.
	buildTimeout = time.Hour
)

// TaskSpec is the built-in task's spec, without its version. Its container
// is never run: the executor recognises TaskType.
func TaskSpec() *task.TaskSpec {
	str := func(desc string) *core.Variable {
		return &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_STRING}}, Description: desc}
	}
	return &task.TaskSpec{
		ShortName: TaskName,
		TaskTemplate: &core.TaskTemplate{
			Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: TaskProject, Domain: TaskDomain, Name: TaskName},
			Type: TaskType,
			Metadata: &core.TaskMetadata{
				Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_OTHER, Flavor: "flyte-manager"},
				Timeout: durationpb.New(buildTimeout),
			},
			Interface: &core.TypedInterface{
				Inputs: &core.VariableMap{Variables: []*core.VariableEntry{
					{Key: InputSpec, Value: str("URI of the uploaded ImageSpec (protobuf)")},
					{Key: InputContext, Value: str("URI of the uploaded build context (gzipped tarball), or empty")},
					{Key: InputTarget, Value: str("the image's name:tag")},
				}},
				Outputs: &core.VariableMap{Variables: []*core.VariableEntry{
					{Key: OutputFQIN, Value: str("the fully qualified image name tasks run with")},
				}},
			},
			Target: &core.TaskTemplate_Container{Container: &core.Container{
				Image: "flyte-manager:builtin",
				Args:  []string{"flyte-manager", "(built-in image build)"},
			}},
		},
	}
}

// Reserved says whether a task name is the built-in task's, which only
// the manager deploys: a version deployed by a user would be the "latest"
// the SDK runs for everyone's builds, with the secrets their layers mount.
func Reserved(org, project, domain, name string) bool {
	return org == ident.Org("") && project == TaskProject && domain == TaskDomain && name == TaskName
}

// IsBuild says whether spec is the built-in build task.
func IsBuild(spec *task.TaskSpec) bool {
	t := spec.GetTaskTemplate()
	return t.GetType() == TaskType && t.GetId().GetProject() == TaskProject && t.GetId().GetName() == TaskName
}

// Deploy records the built-in task in system/production under a version
// named after its spec's digest (a manager whose task changed deploys a
// newer version, which the SDK's "latest" picks). It is idempotent.
func Deploy(ctx context.Context, tasks *store.Tasks) error {
	spec := TaskSpec()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		return err
	}
	version := "fm-" + store.SpecDigest(b)[:16]
	org := ident.Org("")
	id := spec.GetTaskTemplate().GetId()
	id.Version, id.Org = version, org
	b, err = proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		return err
	}
	_, _, err = tasks.Deploy(ctx, store.Task{
		TaskID:     store.TaskID{Org: org, Project: TaskProject, Domain: TaskDomain, Name: TaskName, Version: version},
		SpecDigest: store.SpecDigest(b),
		ShortName:  TaskName,
		DeployedBy: "flyte-manager",
	}, b)
	if err != nil {
		return fmt.Errorf("deploying the built-in task %s/%s/%s: %w", TaskProject, TaskDomain, TaskName, err)
	}
	return nil
}
