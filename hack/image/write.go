package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"fmgr.dev/internal/config"
)

// write puts the build under o.out:
//
//	oci/                               the OCI image layout (index.json → the multi-platform index)
//	flyte-manager.oci.tar              the same layout as one tarball (podman load, docker load on containerd storage, skopeo)
//	flyte-manager-linux-<arch>.docker.tar  one platform as a docker-archive tagged latest (docker load)
//
// Earlier output is replaced.
func write(o options, ref string, idx v1.ImageIndex, images []platformImage, log io.Writer) error {
	dir := filepath.Join(o.out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// One entry per tag, both naming the same index: containerd (docker
	// load) reads io.containerd.image.name, other tools the OCI ref name.
	for _, tag := range []string{o.version, "latest"} {
		full, err := name.NewTag(config.ImageName + ":" + tag)
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
	ociTar := filepath.Join(o.out, config.ImageName+".oci.tar")
	if err := tarDir(dir, ociTar, o); err != nil {
		return err
	}
	logf(log, "wrote %s and %s (%s)", dir, ociTar, ref)
	if !o.dockerTars {
		return nil
	}
	// One tag only: with several, go-containerregistry lists them in map
	// order, and the archive would differ from build to build.
	latest, err := name.NewTag(config.ImageName + ":latest")
	if err != nil {
		return err
	}
	for _, pi := range images {
		out := filepath.Join(o.out, fmt.Sprintf("%s-%s-%s.docker.tar", config.ImageName, pi.plat.OS, pi.plat.Architecture))
		if err := tarball.WriteToFile(out, latest, pi.img); err != nil {
			return err
		}
		logf(log, "wrote %s", out)
	}
	return nil
}

// tarDir packs a directory into a tarball with sorted names, fixed mtimes
// and root ownership, so equal trees give equal bytes.
func tarDir(dir, out string, o options) error {
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
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: o.epoch, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size()}
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
