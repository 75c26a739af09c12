package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Unpacking is contained: every entry is written through an os.Root on
// the target directory, so no name (absolute, with .., or through a
// symbolic link an earlier entry made) reaches outside it, and a hard link
// may only link to a file inside. Symbolic links themselves may point
// anywhere: they are read in the container, where / is the image's root.
// Whiteouts (.wh.<name>, and .wh..wh..opq for a directory whose lower
// contents are hidden) remove what earlier layers put there. Device nodes
// and FIFOs are skipped (the runtime gives a container its /dev), and
// set-user-ID and set-group-ID bits are dropped.

const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// entryName cleans a tar entry's name to a relative path inside the
// target; one that would leave it is an error.
func entryName(n string) (string, error) {
	c := path.Clean("/" + n)
	if strings.Contains(n, "\x00") {
		return "", fmt.Errorf("entry %q: bad name", n)
	}
	for _, el := range strings.Split(n, "/") {
		if el == ".." {
			return "", fmt.Errorf("entry %q leads out of the image's root", n)
		}
	}
	if c == "/" {
		return ".", nil
	}
	return c[1:], nil
}

// unpack applies img's layers, bottom first, in dir.
func unpack(img v1.Image, dir string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i+1, err)
		}
		err = applyLayer(root, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i+1, err)
		}
	}
	return nil
}

// applyLayer writes one layer's tar stream into root.
func applyLayer(root *os.Root, r io.Reader) error {
	tr := tar.NewReader(r)
	// What this layer wrote: an opaque whiteout hides the lower layers'
	// entries only, whatever order the tar lists them in.
	mine := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if n == "." {
			continue
		}
		dir, base := path.Split(n)
		dir = strings.TrimSuffix(dir, "/")
		if dir == "" {
			dir = "."
		}
		switch {
		case base == opaqueWhiteout:
			if err := clearLower(root, dir, mine); err != nil {
				return err
			}
			continue
		case strings.HasPrefix(base, whiteoutPrefix):
			if err := root.RemoveAll(path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix))); err != nil {
				return err
			}
			continue
		}
		if err := mkdirAll(root, dir); err != nil {
			return fmt.Errorf("entry %q: %w", h.Name, err)
		}
		if err := applyEntry(root, n, h, tr); err != nil {
			return fmt.Errorf("entry %q: %w", h.Name, err)
		}
		mine[n] = true
	}
}

func applyEntry(root *os.Root, n string, h *tar.Header, r io.Reader) error {
	mode := fs.FileMode(h.Mode) & (fs.ModePerm | fs.ModeSticky)
	if h.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	// An entry replaces what a lower layer had at its name, except a
	// directory, which merges with a lower directory.
	if fi, err := root.Lstat(n); err == nil && !(h.Typeflag == tar.TypeDir && fi.IsDir()) {
		if err := root.RemoveAll(n); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.Mkdir(n, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case tar.TypeReg:
		if err := writeFile(root, n, r, 0o600); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := root.Symlink(h.Linkname, n); err != nil {
			return err
		}
		if err := root.Lchown(n, h.Uid, h.Gid); err != nil && os.Geteuid() == 0 {
			return err
		}
		return nil
	case tar.TypeLink:
		target, err := entryName(h.Linkname)
		if err != nil {
			return err
		}
		return root.Link(target, n)
	default:
		return nil // devices, FIFOs: not in a container's image root
	}
	if err := root.Lchown(n, h.Uid, h.Gid); err != nil && os.Geteuid() == 0 {
		return err
	}
	return root.Chmod(n, mode)
}

// clearLower removes what lower layers put in dir, keeping what this
// layer wrote there.
func clearLower(root *os.Root, dir string, mine map[string]bool) error {
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, e := range names {
		p := path.Join(dir, e)
		if !mine[p] {
			if err := root.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// mkdirAll makes dir and its missing parents 0755 (whatever the umask: the
// container's user must be able to enter them).
func mkdirAll(root *os.Root, dir string) error {
	if dir == "." {
		return nil
	}
	if _, err := root.Lstat(dir); err == nil {
		return nil
	}
	if err := mkdirAll(root, path.Dir(dir)); err != nil {
		return err
	}
	if err := root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return root.Chmod(dir, 0o755)
}
