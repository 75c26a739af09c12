package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PlatformImage is one platform's image.
type PlatformImage struct {
	Platform *v1.Platform
	Image    v1.Image
}

// Output says where and under which name Write puts an image.
type Output struct {
	Dir        string    // the output directory
	Name       string    // the image's name, e.g. flyte-manager
	Version    string    // a tag besides latest
	Epoch      time.Time // every archive entry's mtime
	DockerTars bool      // also one docker-archive per platform
}

// Write puts the build under o.Dir (NAME is o.Name):
//
//	oci/                      the OCI image layout (index.json → the multi-platform index)
//	NAME.oci.tar              the same layout as one tarball (podman load, docker load on containerd storage, skopeo)
//	NAME-linux-<arch>.docker.tar  one platform as a docker-archive tagged latest (docker load)
//
// Earlier output is replaced.
func Write(o Output, idx v1.ImageIndex, images []PlatformImage, log io.Writer) error {
	dir := filepath.Join(o.Dir, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// One entry per tag, both naming the same index: containerd (docker
	// load) reads io.containerd.image.name, other tools the OCI ref name.
	for _, tag := range []string{o.Version, "latest"} {
		full, err := name.NewTag(o.Name + ":" + tag)
		if err != nil {
			return fmt.Errorf("tag %q: %w", tag, err)
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": tag,
			"io.containerd.image.name":          full.Name(),
		})); err != nil {
			return err
		}
	}
	ociTar := filepath.Join(o.Dir, o.Name+".oci.tar")
	if err := TarDir(dir, ociTar, o.Epoch); err != nil {
		return err
	}
	Logf(log, "wrote %s and %s (%s:%s)", dir, ociTar, o.Name, o.Version)
	if !o.DockerTars {
		return nil
	}
	// One tag only: with several, go-containerregistry lists them in map
	// order, and the archive would differ from build to build.
	latest, err := name.NewTag(o.Name + ":latest")
	if err != nil {
		return err
	}
	for _, pi := range images {
		out := filepath.Join(o.Dir, fmt.Sprintf("%s-%s-%s.docker.tar", o.Name, pi.Platform.OS, pi.Platform.Architecture))
		if err := tarball.WriteToFile(out, latest, pi.Image); err != nil {
			return err
		}
		Logf(log, "wrote %s", out)
	}
	return nil
}

// TarDir packs a directory into a tarball with sorted names, fixed mtimes
// and root ownership, so equal trees give equal bytes.
func TarDir(dir, out string, epoch time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		names = append(names, path)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, path := range names {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
