package copilot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/blob"
)

// Download materialises the job's inputs in dir, the host directory that
// the command sees as its input directory. It fails when an input cannot
// be read (a blob outside the manager's storage, say); dir is then left
// half-written, for the caller to discard.
func (j *Job) Download(ctx context.Context, blobs *blob.Store, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lm := &core.LiteralMap{Literals: map[string]*core.Literal{}}
	native := map[string]any{}
	for _, nl := range j.Inputs.GetLiterals() {
		name, lit := nl.GetName(), nl.GetValue()
		if !validName(name) {
			return fmt.Errorf("input %q cannot be a file name", name)
		}
		lit, err := resolveOffloaded(ctx, blobs, lit)
		if err != nil {
			return fmt.Errorf("input %s: %w", name, err)
		}
		host := filepath.Join(dir, name)
		seen := path.Join(j.InputDir, name)
		if b := lit.GetScalar().GetBlob(); b != nil && j.namedFile(b) {
			if err := os.MkdirAll(host, 0o755); err != nil {
				return err
			}
			base := blobBase(b.GetUri(), name)
			host, seen = filepath.Join(host, base), path.Join(seen, base)
		}
		v, err := j.materialise(ctx, blobs, lit, host, seen)
		if err != nil {
			return fmt.Errorf("input %s: %w", name, err)
		}
		lm.Literals[name], native[name] = lit, v
	}
	b, err := proto.Marshal(lm)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, InputsProto), b, 0o644); err != nil {
		return err
	}
	switch j.Format {
	case core.DataLoadingConfig_JSON:
		b, err = json.Marshal(native)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, InputsJSON), b, 0o644)
		}
	case core.DataLoadingConfig_YAML:
		b, err = yaml.Marshal(native)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, InputsYAML), b, 0o644)
		}
	}
	return err
}

// validName keeps input and output names to single path elements.
func validName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\x00")
}

// resolveOffloaded replaces a literal the SDK offloaded to storage by the
// literal stored there.
func resolveOffloaded(ctx context.Context, blobs *blob.Store, lit *core.Literal) (*core.Literal, error) {
	om := lit.GetOffloadedMetadata()
	if om == nil {
		return lit, nil
	}
	b, err := readBlob(ctx, blobs, om.GetUri())
	if err != nil {
		return nil, err
	}
	out := &core.Literal{}
	if err := proto.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("the offloaded literal at %s is unreadable: %w", om.GetUri(), err)
	}
	return out, nil
}

// materialise writes lit at host (seen is the same place as the command
// sees it) and returns its value for inputs.json.
func (j *Job) materialise(ctx context.Context, blobs *blob.Store, lit *core.Literal, host, seen string) (any, error) {
	switch {
	case lit.GetCollection() != nil:
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, err
		}
		var vals []any
		taken := map[string]bool{}
		for i, item := range lit.GetCollection().GetLiterals() {
			n := j.elementName(i, item, taken)
			v, err := j.materialise(ctx, blobs, item, filepath.Join(host, n), path.Join(seen, n))
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		return vals, nil
	case lit.GetMap() != nil:
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, err
		}
		vals := map[string]any{}
		for k, item := range lit.GetMap().GetLiterals() {
			if !validName(k) {
				return nil, fmt.Errorf("map key %q cannot be a file name", k)
			}
			v, err := j.materialise(ctx, blobs, item, filepath.Join(host, k), path.Join(seen, k))
			if err != nil {
				return nil, err
			}
			vals[k] = v
		}
		return vals, nil
	}
	s := lit.GetScalar()
	switch {
	case s.GetPrimitive() != nil:
		return primitiveValue(s.GetPrimitive()), os.WriteFile(host, []byte(primitiveText(s.GetPrimitive())), 0o644)
	case s.GetBlob() != nil:
		return seen, j.downloadBlob(ctx, blobs, s.GetBlob(), host)
	case s.GetBinary() != nil:
		return s.GetBinary().GetValue(), os.WriteFile(host, s.GetBinary().GetValue(), 0o644)
	case s.GetGeneric() != nil:
		b, err := s.GetGeneric().MarshalJSON()
		if err != nil {
			return nil, err
		}
		return json.RawMessage(b), os.WriteFile(host, b, 0o644)
	case s.GetUnion() != nil:
		return j.materialise(ctx, blobs, s.GetUnion().GetValue(), host, seen)
	case s.GetError() != nil:
		return s.GetError().GetMessage(), os.WriteFile(host, []byte(s.GetError().GetMessage()), 0o644)
	}
	return nil, os.WriteFile(host, []byte("null"), 0o644)
}

// elementName names element i of a list: its index, or under NAMED_DIR a
// file's own base name (index-prefixed when two share one).
func (j *Job) elementName(i int, item *core.Literal, taken map[string]bool) string {
	b := item.GetScalar().GetBlob()
	if b == nil || !j.namedFile(b) {
		return strconv.Itoa(i)
	}
	base := blobBase(b.GetUri(), "")
	switch {
	case base == "" || !validName(base):
		base = strconv.Itoa(i)
	case taken[base]:
		base = strconv.Itoa(i) + "_" + base
	}
	taken[base] = true
	return base
}

func primitiveValue(p *core.Primitive) any {
	switch v := p.GetValue().(type) {
	case *core.Primitive_StringValue:
		return v.StringValue
	case *core.Primitive_Integer:
		return v.Integer
	case *core.Primitive_FloatValue:
		return v.FloatValue
	case *core.Primitive_Boolean:
		return v.Boolean
	}
	return primitiveText(p)
}

// downloadBlob copies a file, or every file under a directory, from the
// manager's storage to host.
func (j *Job) downloadBlob(ctx context.Context, blobs *blob.Store, b *core.Blob, host string) error {
	key, err := blobs.Key(strings.TrimRight(b.GetUri(), "/"))
	if err != nil {
		if p, ok := hostPath(b.GetUri()); ok && j.HostFiles {
			return j.copyHost(p, host, b.GetMetadata().GetType().GetDimensionality() == core.BlobType_MULTIPART)
		}
		return fmt.Errorf("%s is not in the manager's storage: %w", b.GetUri(), err)
	}
	if b.GetMetadata().GetType().GetDimensionality() != core.BlobType_MULTIPART {
		return copyOut(ctx, blobs, key, host)
	}
	if err := os.MkdirAll(host, 0o755); err != nil {
		return err
	}
	for o, err := range blobs.List(ctx, key+"/") {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(o.Key, key+"/")
		to := filepath.Join(host, filepath.FromSlash(rel))
		if !strings.HasPrefix(to, host+string(filepath.Separator)) {
			continue // a key that would land outside the directory
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := copyOut(ctx, blobs, o.Key, to); err != nil {
			return err
		}
	}
	return nil
}

func copyOut(ctx context.Context, blobs *blob.Store, key, to string) error {
	r, err := blobs.NewReader(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readBlob(ctx context.Context, blobs *blob.Store, uri string) ([]byte, error) {
	key, err := blobs.Key(uri)
	if err != nil {
		return nil, fmt.Errorf("%s is not in the manager's storage: %w", uri, err)
	}
	return blobs.Get(ctx, key)
}

// hostPath is the local path a blob URI names, if it names one.
func hostPath(uri string) (string, bool) {
	p := strings.TrimPrefix(uri, "file://")
	if !filepath.IsAbs(p) {
		return "", false
	}
	return filepath.Clean(p), true
}

// copyHost copies a file, or a directory's regular files, from this host
// (symbolic links inside a directory are not followed).
func (j *Job) copyHost(from, to string, dir bool) error {
	fsys, name := fs.FS(os.DirFS("/")), strings.TrimPrefix(from, "/")
	if j.HostRoot != "" {
		rel, err := filepath.Rel(j.HostRoot, from)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("file://%s is a path on the manager's host outside its storage and its tasks' directories (%s): "+
				"a container cannot be given it; upload the file to the manager's storage, or make it in the task's working directory", from, j.HostRoot)
		}
		// Through a root: a symbolic link cannot lead the copy out of it.
		root, err := os.OpenRoot(j.HostRoot)
		if err != nil {
			return err
		}
		defer root.Close()
		fsys, name = root.FS(), filepath.ToSlash(rel)
	}
	if !dir {
		return copyFile(fsys, name, to)
	}
	return fs.WalkDir(fsys, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, name), "/")
		switch {
		case d.IsDir():
			return os.MkdirAll(filepath.Join(to, filepath.FromSlash(rel)), 0o755)
		case d.Type().IsRegular():
			return copyFile(fsys, p, filepath.Join(to, filepath.FromSlash(rel)))
		}
		return nil
	})
}

func copyFile(fsys fs.FS, from, to string) error {
	src, err := fsys.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
