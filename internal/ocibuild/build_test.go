package ocibuild

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/protobuf/proto"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/ocibuild/ocibuildtest"
	"fmgr.dev/internal/sdktest"
)

// A spec builds into an image on its base, pushed under the prefix: the
// base's layers, a layer of the copied file, one of the packages uv
// installed (a wheel of the context, no index), and env, workdir, PATH and
// PYTHONPATH in its config; GetImage's lookup then finds it, and a layer
// that needs a container runtime fails the build, named, pushing nothing.
func TestBuildPushesTheImage(t *testing.T) {
	ctx := context.Background()
	host := ocibuildtest.Registry(t)
	ocibuildtest.PushBase(t, host+"/base/python:3.12")
	const baseLayers = 1 // PushBase's
	whl, data := ocibuildtest.Wheel(t, "fm_hello")
	tarball := ocibuildtest.Context(t, map[string][]byte{"wheels/" + whl: data, "conf/app.toml": []byte("x = 1\n")})
	spec := &ib.ImageSpec{BaseImage: host + "/base/python:3.12", Layers: []*ib.Layer{
		{Layer: &ib.Layer_Env{Env: &ib.Env{EnvVariables: map[string]string{"FOO": "bar"}}}},
		{Layer: &ib.Layer_CopyConfig{CopyConfig: &ib.CopyConfig{Src: "conf/app.toml", Dst: "/etc/app/"}}},
		{Layer: &ib.Layer_PythonWheels{PythonWheels: &ib.PythonWheels{Dir: "wheels", PackageName: "fm_hello",
			Options: &ib.PipOptions{ExtraArgs: "--no-index"}}}},
		{Layer: &ib.Layer_Workdir{Workdir: &ib.WorkDir{Workdir: "/root"}}},
		{Layer: &ib.Layer_CopyConfig{CopyConfig: &ib.CopyConfig{Src: "conf", Dst: "."}}},
	}}
	r := Registry{Prefix: host + "/flyte", Insecure: true, DockerConfig: t.TempDir()}
	if _, err := r.Lookup(ctx, "img:abc"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("lookup before the build: %v", err)
	}
	var log bytes.Buffer
	fqin, err := r.Build(ctx, Job{Spec: spec, Context: tarball, Target: "img:abc", UV: filepath.Join(sdktest.Venv(t), "bin", "uv"),
		WorkDir: t.TempDir(), Log: &log})
	if err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
	}
	if fqin != host+"/flyte/img:abc" {
		t.Fatalf("fqin %s", fqin)
	}
	if got, err := r.Lookup(ctx, "img:abc"); err != nil || got != fqin {
		t.Fatalf("lookup after the build: %s %v", got, err)
	}
	ref, _ := name.ParseReference(fqin, name.Insecure)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != baseLayers+3 {
		t.Fatalf("%d layers (%v), want the base's %d and three", len(layers), err, baseLayers)
	}
	// A directory copied to . of the working directory: its contents.
	if files := ocibuildtest.Files(t, layers[baseLayers+2]); files["root/app.toml"] != "x = 1\n" {
		t.Errorf("the second copy layer holds %v", keys(files))
	}
	copied := ocibuildtest.Files(t, layers[baseLayers])
	if copied["etc/app/app.toml"] != "x = 1\n" {
		t.Errorf("the copy layer holds %v", copied)
	}
	pkgs := ocibuildtest.Files(t, layers[baseLayers+1])
	if pkgs["opt/flyte-manager/packages/fm_hello/__init__.py"] != "VALUE = 42\n" {
		t.Errorf("the packages layer holds %v", keys(pkgs))
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	env := cf.Config.Env
	for _, want := range []string{"FOO=bar", "PYTHONPATH=" + PackagesDir, "PATH=" + PackagesDir + "/bin:/usr/local/bin:/usr/bin:/bin"} {
		if !slices.Contains(env, want) {
			t.Errorf("config env %v lacks %s", env, want)
		}
	}
	if cf.Config.WorkingDir != "/root" {
		t.Errorf("workdir %q", cf.Config.WorkingDir)
	}

	// The spec's platforms: an index of one image per platform, each on
	// the base's image of its architecture.
	multi := proto.Clone(spec).(*ib.ImageSpec)
	multi.Platform = []string{"linux/amd64", "linux/arm64"}
	if _, err := r.Build(ctx, Job{Spec: multi, Context: tarball, Target: "multi:1", UV: filepath.Join(sdktest.Venv(t), "bin", "uv"),
		WorkDir: t.TempDir(), Log: &log}); err != nil {
		t.Fatalf("a build for two platforms: %v\n%s", err, log.String())
	}
	mref, _ := name.ParseReference(host+"/flyte/multi:1", name.Insecure)
	idx, err := remote.Index(mref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 2 {
		t.Fatalf("the index: %v %v", im, err)
	}
	for _, d := range im.Manifests {
		one, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		ls, _ := one.Layers()
		cf, _ := one.ConfigFile()
		if len(ls) != 4 || cf.Architecture != d.Platform.Architecture ||
			ocibuildtest.Files(t, ls[0])["etc/base-image"] != "base "+d.Platform.Architecture+"\n" {
			t.Errorf("the %s image: %d layers, config for %s", d.Platform, len(ls), cf.Architecture)
		}
	}

	// A target naming its own registry is pushed there.
	if got := r.FQIN("other.example:5000/team/img:1"); got != "other.example:5000/team/img:1" {
		t.Errorf("FQIN of a registry's image: %s", got)
	}

	apt := &ib.ImageSpec{BaseImage: spec.BaseImage, Layers: []*ib.Layer{spec.Layers[0],
		{Layer: &ib.Layer_AptPackages{AptPackages: &ib.AptPackages{Packages: []string{"cowsay"}}}}}}
	_, err = r.Build(ctx, Job{Spec: apt, Target: "apt:1", UV: "uv", WorkDir: t.TempDir()})
	var le *images.LayerError
	if !errors.As(err, &le) || le.Layer != 2 || !strings.Contains(err.Error(), "apt_packages: cowsay") ||
		!strings.Contains(err.Error(), "container runtime") {
		t.Errorf("an apt layer: %v", err)
	}
	if _, err := r.Lookup(ctx, "apt:1"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("a failed build pushed something: %v", err)
	}

	// A builder without uv fails at the first package layer, saying so.
	_, err = r.Build(ctx, Job{Spec: spec, Context: tarball, Target: "nouv:1", UV: filepath.Join(t.TempDir(), "uv"), WorkDir: t.TempDir()})
	if !errors.As(err, &le) || le.Layer != 3 || !strings.Contains(err.Error(), "no uv") || !strings.Contains(err.Error(), "builderImage") {
		t.Errorf("a builder without uv: %v", err)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
