package images

import (
	"archive/tar"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"fmgr.dev/executor/local/images/imagetest"
)

type entry = imagetest.Entry

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An OCI layout, an OCI archive and a docker-save tar load; the images
// are listed and resolve by name (normalised) and by digest.
func TestLoadListResolve(t *testing.T) {
	s := openStore(t)
	layoutDir := imagetest.BusyboxLayout(t)
	refs, err := s.Load(layoutDir, "")
	if err != nil || len(refs) != 1 || refs[0] != imagetest.BusyboxRef {
		t.Fatalf("load layout: %v %v", refs, err)
	}

	// The same directory as an OCI archive, named on load.
	archive := filepath.Join(t.TempDir(), "busybox-oci.tar")
	tarDir(t, layoutDir, archive)
	if refs, err := s.Load(archive, "busybox"); err != nil || refs[0] != "index.docker.io/library/busybox:latest" {
		t.Fatalf("load OCI archive: %v %v", refs, err)
	}

	// A docker-save tar names its image by its tag.
	img := imagetest.Image(t, v1.Config{Env: []string{"A=1"}}, imagetest.Layer(t, entry{Name: "hello", Body: []byte("hi")}))
	tag, _ := name.NewTag("example.com/team/hello:2")
	saved := filepath.Join(t.TempDir(), "hello.tar")
	if err := tarball.WriteToFile(saved, tag, img); err != nil {
		t.Fatal(err)
	}
	if refs, err := s.Load(saved, ""); err != nil || refs[0] != "example.com/team/hello:2" {
		t.Fatalf("load docker-save tar: %v %v", refs, err)
	}

	all, err := s.List()
	if err != nil || len(all) != 3 {
		t.Fatalf("list: %v %v", all, err)
	}
	im, err := s.Resolve("docker.io/busybox")
	if err != nil || im.Ref != "index.docker.io/library/busybox:latest" {
		t.Fatalf("resolve busybox: %+v %v", im, err)
	}
	byDigest, err := s.Resolve("whatever.example/x@" + im.Digest)
	if err != nil || byDigest.Digest != im.Digest {
		t.Errorf("resolve by digest: %+v %v", byDigest, err)
	}
	if _, err := s.Resolve("alpine:3"); err == nil || !strings.Contains(err.Error(), "flyte-manager image load") {
		t.Errorf("an image the store lacks: %v", err)
	}
	hello, err := s.Resolve("example.com/team/hello:2")
	if err != nil || hello.Config.Env[0] != "A=1" {
		t.Fatalf("resolve hello: %+v %v", hello, err)
	}
	root, err := s.Rootfs(hello)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "hello")); err != nil || string(b) != "hi" {
		t.Errorf("unpacked file: %q %v", b, err)
	}
	if again, err := s.Rootfs(hello); err != nil || again != root {
		t.Errorf("unpacked again: %s %v", again, err)
	}
}

// Layers apply in order with their whiteouts: a file removed, a directory
// made opaque (the lower layer's entries gone, the upper's kept).
func TestUnpackHonoursWhiteouts(t *testing.T) {
	lower := imagetest.Layer(t, entry{Name: "a", Body: []byte("a")}, entry{Name: "keep", Body: []byte("k")},
		entry{Name: "d", Dir: true}, entry{Name: "d/old", Body: []byte("old")})
	upper := imagetest.Layer(t, entry{Name: "d/new", Body: []byte("new")}, entry{Name: ".wh.a"},
		entry{Name: "d/.wh..wh..opq"}, entry{Name: "keep", Body: []byte("k2")})
	dir := t.TempDir()
	if err := unpack(imagetest.Image(t, v1.Config{}, lower, upper), dir); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a": "", "d/old": "", "d/new": "new", "keep": "k2"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		switch {
		case want == "" && err == nil:
			t.Errorf("%s is still there", p)
		case want != "" && string(b) != want:
			t.Errorf("%s: %q %v, want %q", p, b, err, want)
		}
	}
}

// No entry reaches outside the root: not by .., not through a symbolic
// link an earlier entry made, not as a hard link to a host file.
func TestUnpackStaysInside(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "host"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string][]entry{
		"dotdot":      {{Name: "../escaped", Body: []byte("x")}},
		"via-symlink": {{Name: "evil", Link: outside}, {Name: "evil/escaped", Body: []byte("x")}},
		"via-relative-symlink": {{Name: "evil", Link: "../../../../../../../../.." + outside},
			{Name: "evil/escaped", Body: []byte("x")}},
		"hardlink":             {{Name: "h", Hard: "../../../../../../../../.." + filepath.Join(outside, "host")}},
		"hardlink-via-symlink": {{Name: "evil", Link: outside}, {Name: "h", Hard: "evil/host"}},
	} {
		dir := filepath.Join(t.TempDir(), "root")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		err := unpack(imagetest.Image(t, v1.Config{}, imagetest.Layer(t, l...)), dir)
		if err == nil {
			t.Errorf("%s: unpacked without an error", name)
		}
		entries, _ := os.ReadDir(outside)
		if len(entries) != 1 {
			t.Errorf("%s: something was written outside the root: %v", name, entries)
		}
		if fi, err := os.Lstat(filepath.Join(dir, "h")); err == nil && fi.Mode().IsRegular() {
			t.Errorf("%s: a hard link to the host's file was made", name)
		}
	}
}

// tarDir packs dir's files into a tar at to.
func tarDir(t *testing.T, dir, to string) {
	t.Helper()
	f, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = rel
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
