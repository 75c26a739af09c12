package blob

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"fmgr.dev/internal/errs"
)

// A file store may be given an S3 alias (Options.FileAlias): the bucket of
// an S3 endpoint that serves the store (package s3serve). URI then names
// objects as s3://<bucket>/<key>, so task processes reach them through the
// endpoint as they would real S3 (and the SDK uploads what a task returns
// rather than keeping a local path); Key accepts those and, for what was
// stored before, the store's paths.

// validAlias checks a FileAlias: s3://<bucket>.
func validAlias(alias string) (string, error) {
	bucket, ok := strings.CutPrefix(alias, "s3://")
	if !ok || bucket == "" || strings.ContainsAny(bucket, "/?#") {
		return "", errs.Invalidf("file store alias %q must be s3://<bucket>", alias)
	}
	return "s3://" + bucket + "/", nil
}

// Dir is a file store's directory ("" for other stores), whatever URI
// names its objects as.
func (s *Store) Dir() string {
	if s.kind != KindFile {
		return ""
	}
	return s.root
}

// ErrSymlink: a key's path in a file store passes through a symbolic link.
var ErrSymlink = errors.New("the key's path passes through a symbolic link")

// CheckNoLinks reports, on file stores, whether key's path below the
// store's directory passes through a symbolic link or names one
// (ErrSymlink). Tasks write files into a file store directly, so a link
// there may point anywhere; what serves the store to others (the S3
// endpoint) refuses such keys rather than follow them. Other stores have
// no links.
func (s *Store) CheckNoLinks(key string) error {
	if s.kind != KindFile {
		return nil
	}
	if err := s.check(key); err != nil {
		return err
	}
	p := s.root
	for seg := range strings.SplitSeq(key, "/") {
		p = filepath.Join(p, seg)
		fi, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return ErrSymlink
		}
	}
	return nil
}

// URIs are every location under which something stored may name key: what
// URI returns now and, for file stores, the path (also under the
// symlink-resolved root), its file:// URL and the S3 alias's name, since a
// manager restarted with or without its S3 endpoint names objects one way
// or the other. Whoever asks whether anything still references key asks
// for each.
func (s *Store) URIs(key string) []string {
	out := []string{s.URI(key)}
	if s.kind == KindFile {
		for _, root := range []string{s.root, s.realRoot} {
			p := filepath.Join(root, filepath.FromSlash(key))
			out = append(out, p, "file://"+filepath.ToSlash(p))
		}
		if s.uriPrefix != "" {
			out = append(out, s.uriPrefix+key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
