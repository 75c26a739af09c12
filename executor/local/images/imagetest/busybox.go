// Package imagetest builds small OCI images for tests, without a registry:
// busybox from the host's static busybox (Debian's busybox-static).
package imagetest

import (
	"archive/tar"
	"bytes"
	"os"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"fmgr.dev/internal/ocibuild/ocibuildtest"
)

// BusyboxPath is the static busybox the image is built from.
const BusyboxPath = "/bin/busybox"

// BusyboxRef is the reference the busybox layout names its image by.
const BusyboxRef = "localhost/fm-test/busybox:1"

// busyboxApplets are the links the image gets to busybox.
var busyboxApplets = []string{"sh", "cat", "echo", "ls", "id", "grep", "ps", "wc", "head", "expr", "sleep",
	"mkdir", "cp", "ln", "test", "[", "tr", "sed", "awk", "hostname", "env", "true", "false", "printf", "readlink", "rm", "stat"}

// Entry is a file of a layer: a directory (Dir), a symbolic link
// (Link), a hard link (Hard) or a regular file (Body).
type Entry struct {
	Name       string
	Mode       int64
	Dir        bool
	Link, Hard string
	Body       []byte
}

// Layer builds an uncompressed layer of entries.
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Typeflag: tar.TypeReg, Size: int64(len(e.Body))}
		switch {
		case e.Dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.Link, 0
		case e.Hard != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.Hard, 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if e.Dir {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.Body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return ocibuildtest.TarLayer(t, buf.Bytes())
}

// Image is a linux/amd64 image of layers with cfg as its configuration.
func Image(t testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	return ocibuildtest.Image(t, "amd64", cfg, layers...)
}

// WriteLayout writes img as an OCI image layout in dir, named ref.
func WriteLayout(t testing.TB, dir, ref string, img v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		t.Fatal(err)
	}
}

// Busybox returns an image of the host's static busybox with its applets
// in /bin, a world-writable /tmp and nobody in /etc/passwd; the test is
// skipped without busybox-static.
func Busybox(t testing.TB) v1.Image {
	t.Helper()
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Skipf("needs a static busybox at %s (apt-get install busybox-static): %v", BusyboxPath, err)
	}
	entries := []Entry{
		{Name: "bin", Dir: true}, {Name: "etc", Dir: true}, {Name: "tmp", Dir: true, Mode: 0o1777},
		{Name: "var", Dir: true}, {Name: "proc", Dir: true}, {Name: "sys", Dir: true}, {Name: "dev", Dir: true},
		{Name: "bin/busybox", Mode: 0o755, Body: bin},
		{Name: "etc/passwd", Body: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")},
		{Name: "etc/group", Body: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for _, a := range busyboxApplets {
		entries = append(entries, Entry{Name: "bin/" + a, Link: "busybox"})
	}
	return Image(t, v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}, WorkingDir: "/"}, Layer(t, entries...))
}

// BusyboxLayout writes the busybox image as an OCI layout in a new
// directory, named BusyboxRef, and returns the directory.
func BusyboxLayout(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	WriteLayout(t, dir, BusyboxRef, Busybox(t))
	return dir
}
