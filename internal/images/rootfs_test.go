package images

import (
	"archive/tar"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
)

func apt(pkgs ...string) *ib.Layer {
	return &ib.Layer{Layer: &ib.Layer_AptPackages{AptPackages: &ib.AptPackages{Packages: pkgs}}}
}

func commands(cmds ...string) *ib.Layer {
	return &ib.Layer{Layer: &ib.Layer_Commands{Commands: &ib.Commands{Cmd: cmds}}}
}

func TestAnalyseRootfs(t *testing.T) {
	spec := &ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{
		apt("cowsay"), commands("touch /made-by-commands"), pip("humanize==4.9.0"),
		{Layer: &ib.Layer_Env{Env: &ib.Env{EnvVariables: map[string]string{"A": "1"}}}},
	}}
	if !NeedsRootfs(spec) || NeedsRootfs(&ib.ImageSpec{Layers: []*ib.Layer{pip("x")}}) {
		t.Fatal("NeedsRootfs: apt and commands layers need a root filesystem, pip layers do not")
	}
	r, err := AnalyseRootfs(spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Suite != "bookworm" || r.SDK != "2.12.1" || r.Env["A"] != "1" || len(r.Layers) != 3 {
		t.Fatalf("plan: %+v", r)
	}
	if r.Layers[0].Layer != 1 || r.Layers[1].Layer != 2 || r.Layers[2].Layer != 3 || r.Layers[2].Pip == nil {
		t.Fatalf("layers: %+v", r.Layers)
	}
	script := RootfsScript(r, "k", "/opt/uv", "/etc/ca.crt", "", "/s", "")
	for _, want := range []string{"mmdebstrap", "--include=python3,ca-certificates", "apt-get install -y --no-install-recommends cowsay",
		"touch /made-by-commands", "flyte==2.12.1", "humanize==4.9.0", "bookworm", "/s/rootfs.tar", "== layer 2: commands"} {
		if !strings.Contains(script, want) {
			t.Errorf("the script lacks %q:\n%s", want, script)
		}
	}
	for code, want := range map[int]string{ExitBase: "the base image", ExitLayer + 1: "layer 1 (apt_packages: cowsay)",
		ExitLayer + 2: "layer 2 (commands: touch /made-by-commands)", ExitLayer + 3: "layer 3 (pip_packages: humanize==4.9.0)"} {
		if err := r.FailedLayer(code); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("exit %d: %v, want %q", code, err, want)
		}
	}

	for _, c := range []struct {
		spec *ib.ImageSpec
		want string
	}{
		{&ib.ImageSpec{BaseImage: "python:3.12-slim-bookworm", Layers: []*ib.Layer{apt("git")}}, "no Debian suite this manager builds from has Python 3.12"},
		{&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{pip("x"), apt("git", "-o=evil")}}, "layer 2 (apt_packages: git -o=evil)"},
		{&ib.ImageSpec{BaseImage: "nvcr.io/nvidia/pytorch:24.01", Layers: []*ib.Layer{apt("git")}}, "the base image (nvcr.io/nvidia/pytorch:24.01)"},
	} {
		if _, err := AnalyseRootfs(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.spec, err, c.want)
		}
	}
}

func TestInstallRootfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking a root filesystem with its owners needs root")
	}
	s := NewStore(t.TempDir(), 0, slog.Default())
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	write := func(staging string, entries ...*tar.Header) {
		t.Helper()
		if err := os.MkdirAll(staging, 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(staging, RootfsTarball))
		if err != nil {
			t.Fatal(err)
		}
		tw := tar.NewWriter(f)
		for _, h := range entries {
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Size > 0 {
				_, _ = tw.Write([]byte(strings.Repeat("x", int(h.Size))))
			}
		}
		_ = tw.Close()
		_ = f.Close()
	}
	r := &RootfsPlan{Plan: &Plan{Python: "3.11"}, Suite: "bookworm"}
	const key = "0123456789abcdef0123456789abcdef"
	bad := s.StagingDir("bad")
	write(bad, &tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./dev/sda", Typeflag: tar.TypeBlock, Mode: 0o600})
	if _, err := s.InstallRootfs(bad, key, "x:1", r); err == nil || !strings.Contains(err.Error(), "dev/sda") {
		t.Fatalf("a device node: %v, want it refused", err)
	}
	write(bad, &tar.Header{Name: "./../escape", Typeflag: tar.TypeReg, Mode: 0o644})
	if _, err := s.InstallRootfs(bad, key, "x:1", r); err == nil {
		t.Fatal("an entry outside the root filesystem was taken")
	}
	good := s.StagingDir("good")
	write(good, &tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./usr/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./usr/games/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./usr/games/cowsay", Typeflag: tar.TypeReg, Mode: 0o755, Size: 3, Uid: 0, Gid: 0},
		&tar.Header{Name: "./var/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./var/cache/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 42, Gid: 42},
		&tar.Header{Name: "./etc-link", Typeflag: tar.TypeSymlink, Linkname: "/etc"})
	if reused, err := s.InstallRootfs(good, key, "registry.test/cows:v1", r); err != nil || reused {
		t.Fatalf("install: reused %v, %v", reused, err)
	}
	m, err := s.Built(key, "registry.test/cows:v1", BuildRun{Project: "p", Domain: "d", Name: "r"})
	if err != nil || !m.Rootfs || m.FQIN != Registry+"/cows-rootfs:"+key {
		t.Fatalf("built: %+v %v", m, err)
	}
	if k, ok := KeyOf(m.FQIN); !ok || k != key {
		t.Errorf("KeyOf(%s) = %s %v", m.FQIN, k, ok)
	}
	fi, err := os.Stat(filepath.Join(s.RootfsDir(key), "var", "cache"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 42 {
		t.Errorf("var/cache is uid %d's, want the tarball's 42", uid)
	}
	if _, err := os.Stat(filepath.Join(s.RootfsDir(key), "usr", "games", "cowsay")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(good); !os.IsNotExist(err) {
		t.Errorf("the staging directory is left: %v", err)
	}
}
