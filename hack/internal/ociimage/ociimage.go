// Package ociimage holds what hack/image and hack/sandbox share to build OCI
// images without a daemon: the static manager binary, layers from file lists
// with fixed mtimes, and the layout and archives written under dist/.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Compile builds the static manager (CGO off, trimmed paths, no build id)
// from the module at root for one platform into out.
func Compile(ctx context.Context, goCmd, root, version, revision string, p *v1.Platform, out string) error {
	ldflags := fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s", version, revision)
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./manager")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=")
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %v\n%s", p, err, b)
	}
	return nil
}

// Files collects a layer's entries in the order they are added. Entries
// owned by a uid other than 0 get UserName as their user and group name.
type Files struct {
	UserName string
	entries  []entry
}

type entry struct {
	hdr  tar.Header
	body []byte
}

// Dir adds a directory; name ends in "/".
func (f *Files) Dir(name string, mode int64, owner int) {
	f.entries = append(f.entries, entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner}})
}

// File adds a regular file.
func (f *Files) File(name string, mode int64, owner int, body []byte) {
	f.entries = append(f.entries, entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: owner, Gid: owner, Size: int64(len(body))}, body: body})
}

// Layer writes the entries as a gzipped tar with every mtime at epoch, once,
// so that the layer's bytes (and digest) depend on nothing else.
func (f *Files) Layer(epoch time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, e := range f.entries {
		h := e.hdr
		h.ModTime = epoch
		if h.Uid != 0 {
			h.Uname, h.Gname = f.UserName, f.UserName
		} else {
			h.Uname, h.Gname = "root", "root"
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Size is what pulling the image transfers: its config and compressed
// layers.
func Size(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// Logf writes one progress line.
func Logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format+"\n", args...)
}
