package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/errs"
)

const sdkBase = "ghcr.io/flyteorg/flyte:py3.11-v2.12.1"

func pip(pkgs ...string) *ib.Layer {
	return &ib.Layer{Layer: &ib.Layer_PipPackages{PipPackages: &ib.PipPackages{Packages: pkgs}}}
}

func TestAnalyse(t *testing.T) {
	p, err := Analyse(&ib.ImageSpec{BaseImage: sdkBase, PythonVersion: "3.11", Layers: []*ib.Layer{
		pip("humanize==4.9.0"),
		{Layer: &ib.Layer_Env{Env: &ib.Env{EnvVariables: map[string]string{"A": "1"}}}},
		{Layer: &ib.Layer_Requirements{Requirements: &ib.Requirements{File: "reqs/requirements.txt",
			Options: &ib.PipOptions{IndexUrl: "https://example.test/simple", Pre: true}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Python != "3.11" || p.SDK != "2.12.1" || p.Env["A"] != "1" || len(p.Steps) != 2 {
		t.Fatalf("plan: %+v", p)
	}
	if got := strings.Join(p.Steps[1].Args, " "); got != "--index-url https://example.test/simple --prerelease=allow -r "+ctxRef+"reqs/requirements.txt" {
		t.Errorf("requirements args: %q", got)
	}

	plain, err := Analyse(&ib.ImageSpec{BaseImage: "python:3.12-slim-bookworm", Layers: []*ib.Layer{pip("flyte")}})
	if err != nil || plain.Python != "3.12" || plain.SDK != "" {
		t.Fatalf("plain python base: %+v %v", plain, err)
	}

	// What a Python environment cannot honour fails, naming the layer.
	for _, c := range []struct {
		spec *ib.ImageSpec
		want string
	}{
		{&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{pip("x"),
			{Layer: &ib.Layer_AptPackages{AptPackages: &ib.AptPackages{Packages: []string{"git", "curl"}}}}}},
			"layer 2 (apt_packages: git curl)"},
		{&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{
			{Layer: &ib.Layer_Commands{Commands: &ib.Commands{Cmd: []string{"echo hi"}}}}}},
			"layer 1 (commands: echo hi)"},
		{&ib.ImageSpec{BaseImage: "nvcr.io/nvidia/pytorch:24.01"}, "the base image (nvcr.io/nvidia/pytorch:24.01)"},
		{&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{
			{Layer: &ib.Layer_Requirements{Requirements: &ib.Requirements{File: "../etc/passwd"}}}}},
			"layer 1 (requirements: ../etc/passwd)"},
		{&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{
			{Layer: &ib.Layer_PipPackages{PipPackages: &ib.PipPackages{Packages: []string{"x"}, Options: &ib.PipOptions{ExtraArgs: "--target /etc"}}}}}},
			"layer 1 (pip_packages: x)"},
	} {
		_, err := Analyse(c.spec)
		var le *LayerError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error naming %q", c.spec, err, c.want)
		}
	}
}

func TestKeyAndNames(t *testing.T) {
	spec := &ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{pip("humanize")}}
	k1, _ := Key(spec, "")
	k2, _ := Key(spec, "")
	k3, _ := Key(spec, ContextDigest([]byte("ctx")))
	k4, _ := Key(&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{pip("humanize==4.9.0")}}, "")
	if k1 != k2 || k1 == k3 || k1 == k4 || len(k1) != 32 {
		t.Fatalf("keys: %s %s %s %s", k1, k2, k3, k4)
	}
	fqin := FQIN("flyte:d5d5a324", k1)
	if fqin != Registry+"/flyte:"+k1 {
		t.Errorf("fqin %s", fqin)
	}
	if got, ok := KeyOf(fqin); !ok || got != k1 {
		t.Errorf("KeyOf(%s) = %s %v", fqin, got, ok)
	}
	for _, other := range []string{sdkBase, "flyte:" + k1, Registry + "/flyte:latest"} {
		if _, ok := KeyOf(other); ok {
			t.Errorf("KeyOf(%s) claims it", other)
		}
	}
}

// fakeBuild makes key's environment as a finished build leaves it, and
// installs it as the manager does.
func fakeBuild(t *testing.T, s *Store, key string, size int) {
	t.Helper()
	staging := s.StagingDir("attempt of " + key)
	env := StagedEnv(staging)
	if err := os.MkdirAll(filepath.Join(env, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env, "bin", "blob"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env, "bin", "python"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	plan := &Plan{Python: "3.11", Env: map[string]string{"A": "1"}}
	if reused, err := s.Install(staging, uint32(os.Getuid()), -1, key, "x:1", plan); err != nil || reused {
		t.Fatalf("install: reused %v, %v", reused, err)
	}
}

func TestStoreLookupUseCollect(t *testing.T) {
	s := NewStore(t.TempDir(), 1500, slog.New(slog.DiscardHandler))
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Lookup("a:1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unbuilt: %v", err)
	}
	keys := []string{strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)}
	fakeBuild(t, s, keys[0], 1000)
	if _, err := s.Built(keys[0], "a:1", BuildRun{Project: "p", Domain: "d", Name: "r1"}); err != nil {
		t.Fatal(err)
	}
	fqin, run, err := s.Lookup("a:1")
	if err != nil || fqin != FQIN("a:1", keys[0]) || run.Name != "r1" {
		t.Fatalf("lookup: %s %+v %v", fqin, run, err)
	}
	// a is in use and used longest ago; b is older than c.
	_, release, err := s.Use(keys[0])
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(filepath.Join(s.EnvDir(keys[0]), readyFile), old.Add(-time.Hour), old.Add(-time.Hour))
	fakeBuild(t, s, keys[1], 1000)
	if _, err := s.Built(keys[1], "b:1", BuildRun{}); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(filepath.Join(s.EnvDir(keys[1]), readyFile), old, old)
	fakeBuild(t, s, keys[2], 1000)
	if _, err := s.Built(keys[2], "c:1", BuildRun{}); err != nil { // over the cap: b goes, a is in use
		t.Fatal(err)
	}
	if _, ok := s.Ready(keys[1]); ok {
		t.Error("b, used longest ago of those not in use, was kept over the cap")
	}
	if _, _, err := s.Lookup("b:1"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("collected b still found: %v", err)
	}
	for _, k := range []string{keys[0], keys[2]} {
		if _, ok := s.Ready(k); !ok {
			t.Errorf("%s removed", k)
		}
	}
	release()
	s.Collect("")
	if _, ok := s.Ready(keys[0]); ok {
		t.Error("a, released and used longest ago, was kept over the cap")
	}
	if _, _, err := s.Use(keys[0]); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("use of a collected environment: %v", err)
	}
}

func TestScriptAndFailedLayer(t *testing.T) {
	s := NewStore("/envs", 0, slog.New(slog.DiscardHandler))
	p, err := Analyse(&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{
		{Layer: &ib.Layer_Env{Env: &ib.Env{EnvVariables: map[string]string{"A": "1"}}}},
		pip("it's"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("d", 32)
	script := s.Script(p, key, "/bin/uv", "3.11", "/ctx", "/envs/staging/x")
	for _, want := range []string{
		"'/bin/uv' venv --relocatable --no-config --quiet --python '3.11' '/envs/staging/x/env' || exit 10",
		"'flyte==2.12.1' || exit 10", `'it'\''s' || exit 12`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if err := p.FailedLayer(12); err == nil || !strings.Contains(err.Error(), "layer 2 (pip_packages: it's)") {
		t.Errorf("FailedLayer(12) = %v", err)
	}
	if err := p.FailedLayer(10); err == nil || !strings.Contains(err.Error(), "base image") {
		t.Errorf("FailedLayer(10) = %v", err)
	}
	if err := p.FailedLayer(1); err != nil {
		t.Errorf("FailedLayer(1) = %v", err)
	}
}

func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(tw, body)
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

func TestUnpack(t *testing.T) {
	dir := t.TempDir()
	if err := Unpack(tarball(t, map[string]string{"reqs/requirements.txt": "humanize\n"}), dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "reqs", "requirements.txt")); err != nil || string(b) != "humanize\n" {
		t.Fatalf("unpacked: %q %v", b, err)
	}
	if err := Unpack(tarball(t, map[string]string{"../escape": "x"}), t.TempDir()); err == nil {
		t.Error("a path outside the context was unpacked")
	}
	if err := Unpack([]byte("not gzip"), t.TempDir()); err == nil {
		t.Error("garbage unpacked")
	}
}
