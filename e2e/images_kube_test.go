package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"fmgr.dev/internal/ocibuild/ocibuildtest"
)

// TestImagesKubernetes: with the SDK's remote builder on the kubernetes
// executor, the manager builds a task environment's image (a base of the
// test's registry, an env layer, a copied file) as an OCI image in a Pod
// running `flyte-manager image build-spec`, pushes it to the registry
// (go-containerregistry's, in process) and the task's Pod runs exactly the
// fqin the SDK got back; a second SDK process builds nothing (GetImage
// finds the image in the registry); an image with an apt layer fails its
// build, naming the layer.
func TestImagesKubernetes(t *testing.T) {
	ctx := scenarioContext(t, 10*time.Minute)
	host := ocibuildtest.Registry(t)
	base := host + "/base/python:3.12"
	ocibuildtest.PushBase(t, base)
	c, clusterDir := startKubeCluster(t)
	pods := kubePods
	m := startKubeManager(t, c, clusterDir, c.Kubeconfig, kubeSharedFiles,
		"FLYTE_MANAGER_EXECUTOR_KUBERNETES_IMAGES_REGISTRY="+host+"/flyte",
		"FLYTE_MANAGER_EXECUTOR_KUBERNETES_IMAGES_INSECURE=true",
		// The test cluster runs no images: the "image" names the binary,
		// found on the Pods' PATH with the virtualenv's uv.
		"FLYTE_MANAGER_EXECUTOR_KUBERNETES_IMAGES_BUILDERIMAGE="+managerBin)

	type outcome struct {
		Run, Phase, Error, BuildRun, Output string
	}
	var res struct{ Built, Apt outcome }
	env := []string{"FM_E2E_IMAGES_BASE=" + base}
	driverWith(t, ctx, env, &res, "drive_kube_images.py", sdkEndpoint(m), "all")
	if res.Built.Phase != "SUCCEEDED" || res.Built.Output != "ran" {
		t.Fatalf("the task in the built image: run %s is %s (%q): %s", res.Built.Run, res.Built.Phase, res.Built.Output, res.Built.Error)
	}
	builds := func() []*corev1.Pod {
		var out []*corev1.Pod
		for _, p := range pods.all() {
			if slices.Contains(p.Spec.Containers[0].Command, "build-spec") {
				out = append(out, p)
			}
		}
		return out
	}
	b := builds()
	if len(b) != 2 { // the image's and the apt image's
		t.Fatalf("want two build Pods, got %d", len(b))
	}
	for _, p := range b {
		if p.Spec.Containers[0].Image != managerBin {
			t.Errorf("build Pod %s runs in %s, not the builder's image", p.Name, p.Spec.Containers[0].Image)
		}
	}
	taskPods := pods.ofRun(res.Built.Run)
	if len(taskPods) != 1 {
		t.Fatalf("run %s had %d Pods", res.Built.Run, len(taskPods))
	}
	fqin := taskPods[0].Spec.Containers[0].Image
	if !strings.HasPrefix(fqin, host+"/flyte/e2e-kube-images:") {
		t.Fatalf("the task's Pod runs %s, not an image the manager pushed under %s/flyte", fqin, host)
	}
	ref, err := name.ParseReference(fqin, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("the registry has no %s: %v", fqin, err)
	}
	layers, _ := img.Layers()
	cf, _ := img.ConfigFile()
	if len(layers) != 2 || !slices.Contains(cf.Config.Env, "E2E_IMAGE=kube") {
		t.Errorf("%s has %d layers (want the base's and the copied file's) and env %v", fqin, len(layers), cf.Config.Env)
	} else if files := ocibuildtest.Files(t, layers[1]); files["etc/e2e/images_requirements.txt"] == "" {
		t.Errorf("the copied file's layer holds %v", files)
	}
	if res.Apt.Phase != "BUILD_FAILED" || !strings.Contains(res.Apt.Error, "(apt_packages: cowsay)") {
		t.Errorf("the apt image: %s (build run %s) with %q, want its build failed naming the apt layer", res.Apt.Phase, res.Apt.BuildRun, res.Apt.Error)
	}

	var again struct{ Built outcome }
	driverWith(t, ctx, env, &again, "drive_kube_images.py", sdkEndpoint(m), "again")
	if again.Built.Phase != "SUCCEEDED" {
		t.Fatalf("the second run: %s: %s", again.Built.Phase, again.Built.Error)
	}
	if b := builds(); len(b) != 2 {
		t.Errorf("the second run of the same image built again: %d build Pods", len(b))
	}
	if p := pods.ofRun(again.Built.Run); len(p) != 1 || p[0].Spec.Containers[0].Image != fqin {
		t.Errorf("the second run's Pods %d, want one running %s", len(p), fqin)
	}
}
