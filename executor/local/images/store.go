// Package images is the local executor's image store: the OCI images raw
// container tasks run in, kept on this host (no registry is needed). An
// operator loads images into it (`flyte-manager image load`) from an OCI
// image layout directory, an OCI archive (a tar of such a directory) or a
// `docker save` tar; a task's image reference resolves to one of them, and
// its layers are unpacked once into a root filesystem the runtime mounts
// read-only below each attempt's own writable layer.
//
// On disk, under the store's directory:
//
//	layout/            an OCI image layout: blobs and index.json, one entry
//	                   per image, named by its normalised reference
//	                   (annotation org.opencontainers.image.ref.name)
//	rootfs/<digest>/   the unpacked root filesystem of a manifest
//	tmp/               unpacking in progress (renamed into rootfs/ when done)
package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refAnnotation names an image in an OCI layout's index.
const refAnnotation = "org.opencontainers.image.ref.name"

// ErrNotFound is returned by Resolve for a reference the store lacks.
var ErrNotFound = errors.New("image not found")

// Store is an image store in one directory.
type Store struct {
	dir string
	mu  sync.Mutex // one load or unpack at a time in this process
}

// Image is one image of the store.
type Image struct {
	// Ref is its normalised reference (docker.io/library/busybox:latest
	// for busybox).
	Ref string
	// Digest is its manifest's digest.
	Digest string
	// Config is its configuration (environment, working directory,
	// entrypoint and command).
	Config v1.Config
	img    v1.Image
}

// Open opens (creating) the store in dir.
func Open(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("images: the store's directory %q must be absolute", dir)
	}
	s := &Store{dir: dir}
	if _, err := layout.FromPath(s.layoutDir()); err != nil {
		// Private: only runc, as root, reads it (a container sees its image
		// through an overlay of its own, never this path).
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, err
		}
		if _, err := layout.Write(s.layoutDir(), empty.Index); err != nil {
			return nil, fmt.Errorf("images: creating the store in %s: %w", dir, err)
		}
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) layoutDir() string { return filepath.Join(s.dir, "layout") }

// Normalize returns ref in the form the store names images by.
func Normalize(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", ref, err)
	}
	return r.Name(), nil
}

// Load adds the images at path (an OCI layout directory, an OCI archive or
// a docker-save tar) to the store and returns their references. as names
// the image when path holds exactly one image (it then need not name
// itself); an image already stored under a reference is replaced.
func (s *Store) Load(path, as string) ([]string, error) {
	found, cleanup, err := read(path)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	if as != "" {
		if len(found) != 1 {
			return nil, fmt.Errorf("%s holds %d images: a name can be given to one only", path, len(found))
		}
		found[0].ref = as
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := layout.FromPath(s.layoutDir())
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, f := range found {
		if f.ref == "" {
			return nil, fmt.Errorf("an image in %s has no name: give it one (--name)", path)
		}
		ref, err := Normalize(f.ref)
		if err != nil {
			return nil, err
		}
		if _, err := f.img.Manifest(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		err = p.ReplaceImage(f.img, match.Annotation(refAnnotation, ref),
			layout.WithAnnotations(map[string]string{refAnnotation: ref}))
		if err != nil {
			return nil, fmt.Errorf("storing %s: %w", ref, err)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// found is an image read from a file, with the name it gives itself.
type found struct {
	ref string
	img v1.Image
}

// read reads the images at path; cleanup removes what reading them needs
// once they are stored.
func read(path string) (_ []found, cleanup func(), err error) {
	cleanup = func() {}
	info, err := os.Stat(path)
	if err != nil {
		return nil, cleanup, err
	}
	if info.IsDir() {
		f, err := readLayout(path)
		return f, cleanup, err
	}
	// A docker-save tar has manifest.json, an OCI archive oci-layout.
	names, err := tarNames(path)
	if err != nil {
		return nil, cleanup, fmt.Errorf("%s is neither an OCI layout directory nor a tar: %w", path, err)
	}
	switch {
	case slices.Contains(names, "manifest.json"):
		f, err := readDockerSave(path)
		return f, cleanup, err
	case slices.Contains(names, "oci-layout"):
		tmp, err := os.MkdirTemp("", "image-load-")
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = func() { _ = os.RemoveAll(tmp) }
		if err := untarFlat(path, tmp); err != nil {
			return nil, cleanup, err
		}
		f, err := readLayout(tmp)
		return f, cleanup, err
	}
	return nil, cleanup, fmt.Errorf("%s is neither a docker-save tar (manifest.json) nor an OCI archive (oci-layout)", path)
}

func readLayout(dir string) ([]found, error) {
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout: %w", dir, err)
	}
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []found
	for _, d := range m.Manifests {
		if !d.MediaType.IsImage() {
			continue // an index of platforms: load the platform's image itself
		}
		img, err := ii.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		out = append(out, found{ref: d.Annotations[refAnnotation], img: img})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no image manifest", dir)
	}
	return out, nil
}

func readDockerSave(path string) ([]found, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var out []found
	for _, d := range m {
		if len(d.RepoTags) == 0 {
			if len(m) > 1 {
				return nil, fmt.Errorf("%s holds an image without a tag beside others", path)
			}
			img, err := tarball.Image(opener, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, found{img: img})
			continue
		}
		for _, t := range d.RepoTags {
			tag, err := name.NewTag(t)
			if err != nil {
				return nil, err
			}
			img, err := tarball.Image(opener, &tag)
			if err != nil {
				return nil, err
			}
			out = append(out, found{ref: t, img: img})
		}
	}
	return out, nil
}

// tarNames lists the top-level regular files of a tar.
func tarNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		if n := strings.TrimPrefix(filepath.Clean(h.Name), "./"); h.Typeflag == tar.TypeReg && !strings.Contains(n, "/") {
			names = append(names, n)
		}
	}
}

// untarFlat extracts the regular files and directories of an OCI archive
// into dir, through an os.Root: no entry lands outside it.
func untarFlat(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n, err := entryName(h.Name)
		if err != nil || n == "." {
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(n, 0o755)
		case tar.TypeReg:
			if err = root.MkdirAll(filepath.Dir(n), 0o755); err == nil {
				err = writeFile(root, n, tr, 0o644)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// List returns the store's images, by reference.
func (s *Store) List() ([]Image, error) {
	ii, err := layout.ImageIndexFromPath(s.layoutDir())
	if err != nil {
		return nil, err
	}
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, d := range m.Manifests {
		ref := d.Annotations[refAnnotation]
		if ref == "" || !d.MediaType.IsImage() {
			continue
		}
		img, err := ii.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", ref, err)
		}
		out = append(out, Image{Ref: ref, Digest: d.Digest.String(), Config: cf.Config, img: img})
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Ref, b.Ref) })
	return out, nil
}

// Resolve finds the image a task's reference names: by its normalised
// name, or by manifest digest (name@sha256:...).
func (s *Store) Resolve(ref string) (Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return Image{}, fmt.Errorf("%q is not an image reference: %w", ref, err)
	}
	all, err := s.List()
	if err != nil {
		return Image{}, err
	}
	for _, im := range all {
		if d, ok := r.(name.Digest); ok {
			if im.Digest == d.DigestStr() {
				return im, nil
			}
			continue
		}
		if im.Ref == r.Name() {
			return im, nil
		}
	}
	return Image{}, fmt.Errorf("%w: %s (this host has no registry access: load it with `flyte-manager image load`)", ErrNotFound, r.Name())
}

// Rootfs returns the directory holding im's root filesystem, unpacking
// its layers the first time.
func (s *Store) Rootfs(im Image) (string, error) {
	h, err := v1.NewHash(im.Digest)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.dir, "rootfs", h.Hex)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "tmp"), 0o700); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), h.Hex[:12]+"-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := unpack(im.img, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("unpacking %s: %w", im.Ref, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	return dir, nil
}

func writeFile(root *os.Root, name string, r io.Reader, mode fs.FileMode) error {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
