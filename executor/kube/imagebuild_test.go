package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/testcluster"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/ocibuild"
	"fmgr.dev/internal/ocibuild/ocibuildtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/store"
)

// envImageBuilder makes the test binary `flyte-manager image build-spec`:
// the test cluster runs Pods as local processes, and a build's Pod runs
// `flyte-manager` from its PATH, a script that runs this binary so.
const envImageBuilder = "FM_KUBE_TEST_IMAGE_BUILDER"

func imageBuilderMain(args []string) int {
	if len(args) < 2 || args[0] != "image" || args[1] != "build-spec" {
		fmt.Fprintf(os.Stderr, "the test's flyte-manager runs `image build-spec` only, not %v\n", args)
		return 2
	}
	p, err := ocibuild.ParsePod(args[2:])
	if err == nil {
		err = p.Run(context.Background(), os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// The build-image task on the kubernetes executor: its attempt is a Pod of
// the manager's image running `flyte-manager image build-spec`, which
// pulls the base from the registry, builds the spec's layers (a wheel of
// the context installed by uv, env), pushes the image under the configured
// prefix and answers the fqin as the task's output; the registry then has
// the manifest with the layers and the config, GetImage's lookup finds it,
// and a task whose image is that fqin gets a Pod with exactly that image.
// A spec with an apt layer fails its run, naming the layer.
func TestImageBuildPod(t *testing.T) {
	host := ocibuildtest.Registry(t)
	ocibuildtest.PushBase(t, host+"/base/python:3.12")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	shim := fmt.Sprintf("#!/bin/sh\nexec env %s=1 %q \"$@\"\n", envImageBuilder, self)
	if err := os.WriteFile(filepath.Join(bin, "flyte-manager"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	venvBin := filepath.Join(sdktest.Venv(t), "bin")
	h := newHarnessOpts(t, dbtest.SQLiteDSN(t), harnessOpts{cluster: testclusterEnv(bin, venvBin, t.TempDir())},
		func(c *config.KubernetesExecutor) {
			c.CopilotImage = "flyte-manager:test"
			c.Images = config.KubernetesImages{Registry: host + "/flyte", Insecure: true, DockerConfig: t.TempDir()}
		})

	whl, data := ocibuildtest.Wheel(t, "fm_hello")
	spec := &ib.ImageSpec{BaseImage: host + "/base/python:3.12", Layers: []*ib.Layer{
		{Layer: &ib.Layer_Env{Env: &ib.Env{EnvVariables: map[string]string{"FOO": "bar"}}}},
		{Layer: &ib.Layer_PythonWheels{PythonWheels: &ib.PythonWheels{Dir: "wheels", PackageName: "fm_hello",
			Options: &ib.PipOptions{ExtraArgs: "--no-index"}}}},
	}}
	key := h.buildRun("build1", spec, ocibuildtest.Context(t, map[string][]byte{"wheels/" + whl: data}), "hello:abc")
	a := h.terminal(key, phase.Succeeded)
	pod, err := h.pod(key, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctr := pod.Spec.Containers[0]
	if ctr.Image != "flyte-manager:test" || !slices.Equal(ctr.Command[:3], []string{"flyte-manager", "image", "build-spec"}) {
		t.Errorf("the build's Pod runs %v in %s", ctr.Command, ctr.Image)
	}
	fqin := h.outputString(a, images.OutputFQIN)
	if fqin != host+"/flyte/hello:abc" {
		t.Fatalf("fqin %q", fqin)
	}
	ref, _ := name.ParseReference(fqin, name.Insecure)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("the registry has no %s: %v", fqin, err)
	}
	layers, _ := img.Layers()
	cf, _ := img.ConfigFile()
	if len(layers) != 2 || !slices.Contains(cf.Config.Env, "FOO=bar") || !slices.Contains(cf.Config.Env, "PYTHONPATH="+ocibuild.PackagesDir) {
		t.Errorf("the image has %d layers (want the base's and the packages'), env %v", len(layers), cf.Config.Env)
	}
	if files := ocibuildtest.Files(t, layers[1]); files["opt/flyte-manager/packages/fm_hello/__init__.py"] == "" {
		t.Errorf("the packages layer lacks the wheel's package")
	}
	r, _ := h.d.ImageRegistry()
	if got, _, err := r.Find(h.ctx, "hello:abc"); err != nil || got != fqin {
		t.Errorf("GetImage's lookup: %s %v", got, err)
	}

	// A second build of the image builds nothing: with its base gone from
	// the registry it still answers the image.
	baseRef, _ := name.ParseReference(host+"/base/python:3.12", name.Insecure)
	if err := remote.Delete(baseRef); err != nil {
		t.Fatal(err)
	}
	again := h.terminal(h.buildRun("build1-again", spec, ocibuildtest.Context(t, map[string][]byte{"wheels/" + whl: data}), "hello:abc"), phase.Succeeded)
	if got := h.outputString(again, images.OutputFQIN); got != fqin {
		t.Errorf("the second build answered %q, want %q", got, fqin)
	}

	// The task that runs in the image.
	tk := h.spec("uses", succeed, taskOpts{})
	tk.TaskTemplate.GetContainer().Image = fqin
	if _, err := h.state.CreateRun(h.ctx, &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: "uses"}},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: tk},
	}); err != nil {
		t.Fatal(err)
	}
	uses := storeKey("p", "development", "uses", store.RootName)
	h.terminal(uses, phase.Succeeded)
	if pod, err := h.pod(uses, 1); err != nil || pod.Spec.Containers[0].Image != fqin {
		t.Errorf("the task's Pod: %v %v", pod.Spec.Containers, err)
	}

	// A layer that needs a container runtime fails the build, named.
	apt := &ib.ImageSpec{BaseImage: spec.BaseImage, Layers: []*ib.Layer{
		{Layer: &ib.Layer_AptPackages{AptPackages: &ib.AptPackages{Packages: []string{"cowsay"}}}}}}
	failed := h.terminal(h.buildRun("build2", apt, nil, "apt:1"), phase.Failed)
	if msg := failed.ErrorInfo; !strings.Contains(string(msg), "layer 1 (apt_packages: cowsay)") {
		t.Errorf("the failed build's error: %s", msg)
	}
}

// testclusterEnv is the Pods' environment: the test's flyte-manager and
// uv first on PATH.
func testclusterEnv(bin, venvBin, home string) testcluster.Options {
	return testcluster.Options{Env: []string{"PATH=" + bin + ":" + venvBin + ":/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home}}
}

// buildRun runs the built-in build-image task with spec and context
// uploaded to storage, as the SDK's remote builder does.
func (h *harness) buildRun(run string, spec *ib.ImageSpec, tarball []byte, target string) store.ActionKey {
	h.t.Helper()
	blobs := h.state.Blobs()
	put := func(key string, b []byte) string {
		if err := blobs.Put(h.ctx, key, b, nil); err != nil {
			h.t.Fatal(err)
		}
		return blobs.URI(key)
	}
	b, err := proto.Marshal(spec)
	if err != nil {
		h.t.Fatal(err)
	}
	str := func(n, v string) *task.NamedLiteral {
		return &task.NamedLiteral{Name: n, Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{
			Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: v}}}}}}}
	}
	in := []*task.NamedLiteral{str(images.InputSpec, put("uploads/"+run+"/spec.pb", b)), str(images.InputTarget, target)}
	if tarball != nil {
		in = append(in, str(images.InputContext, put("uploads/"+run+"/context.tar.gz", tarball)))
	} else {
		in = append(in, str(images.InputContext, ""))
	}
	ts := images.TaskSpec()
	ts.TaskTemplate.Id.Version = "v1"
	if _, err := h.state.CreateRun(h.ctx, &workflow.CreateRunRequest{
		Id:           &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: run}},
		Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: ts},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: in}},
	}); err != nil {
		h.t.Fatal(err)
	}
	return storeKey("p", "development", run, store.RootName)
}

// outputString reads a's string output n.
func (h *harness) outputString(a *store.Action, n string) string {
	h.t.Helper()
	d, err := h.state.Data(h.ctx, &common.ActionIdentifier{Run: &common.RunIdentifier{Project: a.Project, Domain: a.Domain, Name: a.RunName}, Name: a.Name})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, l := range d.Outputs.GetLiterals() {
		if l.GetName() == n {
			return l.GetValue().GetScalar().GetPrimitive().GetStringValue()
		}
	}
	h.t.Fatalf("no output %s in %v", n, d.Outputs)
	return ""
}

// A build's Pod with a push Secret reads its registry credentials from it,
// as $DOCKER_CONFIG/config.json.
func TestImageBuildPodCredentials(t *testing.T) {
	l := &attempt.Launch{Spec: images.TaskSpec(), Attempt: 1, OutDir: "/store/run/a0/1", Args: []string{"flyte-manager", "x"}}
	b := &buildOptions{pod: ocibuild.Pod{Storage: "file:///store", Inputs: "/store/run/a0/inputs.pb", Out: l.OutDir,
		Registry: ocibuild.Registry{Prefix: "registry.example:5000/flyte"}}, image: "fm:1", pushSecret: "regcred"}
	pod, err := buildPod(&v1.TaskAction{}, l, podSpec{build: b})
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "fm:1" || !slices.Contains(c.Command, "registry.example:5000/flyte") || slices.Contains(c.Command, "--insecure") {
		t.Errorf("the build's container runs %v in %s", c.Command, c.Image)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Secret.SecretName != "regcred" ||
		pod.Spec.Volumes[0].Secret.Items[0].Key != corev1.DockerConfigJsonKey || len(c.VolumeMounts) != 1 ||
		!slices.Contains(c.Env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: c.VolumeMounts[0].MountPath}) {
		t.Errorf("the push Secret is not the Pod's docker config: volumes %v, mounts %v, env %v", pod.Spec.Volumes, c.VolumeMounts, c.Env)
	}
}
