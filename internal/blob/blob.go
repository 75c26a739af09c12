// Package blob is flyte-manager's one blob-store abstraction, over
// gocloud.dev/blob. A Store is opened from the storage URL:
//
//   - file:///abs/dir — a local directory (the embedded default). Objects are
//     plain files under the directory, so task processes on this host read
//     and write them directly; no sidecar metadata files are written, and
//     nothing here depends on them.
//   - mem:// — in memory, for tests.
//   - s3://bucket[/prefix] — S3 or an S3-compatible store, reached as
//     Options.S3 says (s3.go).
//
// Keys are "/"-separated relative paths, checked by ValidateKey. URI maps a
// key to the location a task process uses for the object (an absolute path
// for file stores, s3://bucket/key for S3) and Key maps such a location back.
//
// Signed URLs for objects are minted by a Signer and served by the manager's
// own /blobs/ endpoint (package dataproxy), so clients need no credentials
// for any store; S3 stores can also presign URLs to themselves (Presign).
package blob

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"mime"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"fmgr.dev/internal/errs"
)

// Kind names a store's driver.
type Kind string

const (
	KindFile Kind = "file"
	KindMem  Kind = "mem"
	KindS3   Kind = "s3"
)

// ErrContentMD5Mismatch is returned when written bytes do not match the
// expected MD5; nothing was stored. It is an errs.ErrInvalid.
var ErrContentMD5Mismatch = fmt.Errorf("content does not match its MD5: %w", errs.ErrInvalid)

// ErrObjectExists is returned by a create-only write (WriteOptions.IfNotExist)
// when the key already names an object; that object was left untouched. It
// is an errs.ErrAlreadyExists.
var ErrObjectExists = fmt.Errorf("an object already exists under this key: %w", errs.ErrAlreadyExists)

// Store is an opened blob store. It is safe for concurrent use.
type Store struct {
	bucket *gcblob.Bucket
	kind   Kind
	// root is the absolute directory of a file store; realRoot is the same
	// with symlinks resolved (Key accepts paths under either).
	root, realRoot string
	// uriPrefix is what URI puts before a key for mem and s3 stores, and
	// for file stores with an S3 alias (alias.go).
	uriPrefix string
	// s3 is set for S3 stores.
	s3 *s3Store
}

// Open opens the store named by rawURL (see the package comment) with
// default options. A file store's directory is created if it does not
// exist.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	return OpenWith(ctx, rawURL, Options{})
}

// OpenWith is Open with options for the store's driver.
func OpenWith(ctx context.Context, rawURL string, o Options) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errs.Invalidf("storage URL %q is not a URL", rawURL)
	}
	switch u.Scheme {
	case "file":
		st, err := openFile(u)
		if err == nil && o.FileAlias != "" {
			if st.uriPrefix, err = validAlias(o.FileAlias); err != nil {
				_ = st.Close()
				return nil, err
			}
		}
		return st, err
	case "mem":
		return &Store{bucket: memblob.OpenBucket(nil), kind: KindMem, uriPrefix: "mem:///"}, nil
	case "s3":
		return openS3(ctx, u, o.S3)
	case "":
		return nil, errs.Invalidf("storage URL %q has no scheme (use file:///abs/dir, s3://bucket or mem://)", rawURL)
	default:
		return nil, errs.Invalidf("storage URL scheme %q is not supported (use file:///abs/dir, s3://bucket or mem://)", u.Scheme)
	}
}

func openFile(u *url.URL) (*Store, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, errs.Invalidf("file storage URL must name a local directory (file:///abs/dir), got host %q", u.Host)
	}
	if u.RawQuery != "" {
		return nil, errs.Invalidf("file storage URL takes no query parameters")
	}
	dir := filepath.FromSlash(u.Path)
	if !filepath.IsAbs(dir) {
		return nil, errs.Invalidf("file storage URL must hold an absolute path (file:///abs/dir), got %q", u.Path)
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating storage directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving storage directory %s: %w", dir, err)
	}
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{
		// Temporary files go next to their target: os.TempDir may be on
		// another filesystem, where the final rename would fail.
		NoTempDir: true,
		// No .attrs sidecars: tasks write files here directly, and a Dir
		// download must not pick up metadata files.
		Metadata:    fileblob.MetadataDontWrite,
		DirFileMode: 0o777, // before the umask (and a default ACL: the local executor's run bases)
	})
	if err != nil {
		return nil, fmt.Errorf("opening storage directory %s: %w", dir, err)
	}
	return &Store{bucket: b, kind: KindFile, root: dir, realRoot: real}, nil
}

// Kind reports the store's driver.
func (s *Store) Kind() Kind { return s.kind }

// Close releases the store.
func (s *Store) Close() error { return s.bucket.Close() }

// CheckKey reports whether key is valid for this store: ValidateKey plus
// the driver's own reservations (file stores reserve names ending in
// .attrs).
func (s *Store) CheckKey(key string) error { return s.check(key) }

func (s *Store) check(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if s.kind == KindFile && strings.HasSuffix(key, ".attrs") {
		return errs.Invalidf("key %q: names ending in .attrs are reserved by the file store", key)
	}
	return nil
}

// wrap turns a driver error into the project's vocabulary.
func (s *Store) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return errs.NotFoundf("object %q", key)
	case gcerrors.Canceled:
		return fmt.Errorf("blob %s %q: %w", op, key, context.Canceled)
	case gcerrors.DeadlineExceeded:
		return fmt.Errorf("blob %s %q: %w", op, key, context.DeadlineExceeded)
	}
	if s.kind == KindFile {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return errs.NotFoundf("object %q", key)
		case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
			// A part of key's path is an object (ENOTDIR), or key is a
			// prefix of other objects (EISDIR): on disk neither can be an
			// object, so there is none to read, and none can be written.
			if op == "write" {
				return fmt.Errorf("object %q cannot be stored: a prefix of it is an object, or other objects are under it: %w", key, errs.ErrPrecondition)
			}
			return errs.NotFoundf("object %q", key)
		}
	}
	return fmt.Errorf("blob %s %q: %w", op, key, err)
}

// URI is the location of key as a task process on this host names it: the
// absolute filesystem path for file stores (s3://<bucket>/key with an S3
// alias, alias.go), s3://bucket/[prefix/]key for S3, mem:///key for
// memory stores. key is not validated here; callers
// build it from validated parts or get it from Key.
func (s *Store) URI(key string) string {
	if s.kind == KindFile && s.uriPrefix == "" {
		return s.filePath(key)
	}
	return s.uriPrefix + key
}

// filePath is where a file store keeps key.
func (s *Store) filePath(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// Key is the inverse of URI: it accepts what URI returns (and, for file
// stores, file:// URLs and paths under the symlink-resolved root) and
// returns the key. Anything outside the store, or naming the store's root
// itself, is an errs.ErrInvalid.
func (s *Store) Key(uri string) (string, error) {
	var key string
	aliased := s.kind == KindFile && s.uriPrefix != "" && strings.HasPrefix(uri, s.uriPrefix)
	switch {
	case s.kind == KindFile && !aliased:
		p := uri
		if strings.HasPrefix(uri, "file://") {
			u, err := url.Parse(uri)
			if err != nil || (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" {
				return "", errs.Invalidf("%q is not a local file URL", uri)
			}
			p = filepath.FromSlash(u.Path)
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return "", errs.Invalidf("%q is not a clean absolute path in the store", uri)
		}
		key = under(s.root, p)
		if key == "" && s.realRoot != s.root {
			key = under(s.realRoot, p)
		}
	default:
		key, _ = strings.CutPrefix(uri, s.uriPrefix)
		if key == uri {
			key = ""
		}
	}
	if key == "" {
		return "", errs.Invalidf("%q is outside the store", uri)
	}
	if err := s.check(key); err != nil {
		return "", err
	}
	return key, nil
}

// under returns p relative to root in slash form, or "" if p is not
// strictly inside root.
func under(root, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// WriteOptions tune a write. The zero value is fine.
type WriteOptions struct {
	// ContentType is recorded where the store keeps it (not in file stores).
	ContentType string
	// ContentMD5, when set, must equal the MD5 of the bytes written, or the
	// write fails with ErrContentMD5Mismatch and nothing becomes visible.
	ContentMD5 []byte
	// IfNotExist makes the write create-only: if key names an object when
	// the write commits, Close fails with ErrObjectExists and the object is
	// left as it was. The check and the commit are one atomic step, so two
	// racing writers never both succeed: file stores link the finished
	// temporary file into place (link(2) refuses an existing name, whoever
	// created it: this manager, another one or a task), S3 and memory stores
	// use the driver's conditional write (S3: If-None-Match: *).
	IfNotExist bool
}

// Put stores data under key, replacing any existing object (unless
// opts.IfNotExist).
func (s *Store) Put(ctx context.Context, key string, data []byte, opts *WriteOptions) error {
	w, err := s.NewWriter(ctx, key, opts)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// Get returns the whole object; meant for small objects.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	data, err := s.bucket.ReadAll(ctx, key)
	return data, s.wrap("read", key, err)
}

// Exists reports whether key names an object.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := s.check(key); err != nil {
		return false, err
	}
	ok, err := s.bucket.Exists(ctx, key)
	if err = s.wrap("stat", key, err); errors.Is(err, errs.ErrNotFound) {
		return false, nil
	}
	return ok, err
}

// Delete removes the object; a missing object is an errs.ErrNotFound.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check(key); err != nil {
		return err
	}
	return s.wrap("delete", key, s.bucket.Delete(ctx, key))
}

// Attributes describe a stored object.
type Attributes struct {
	Size        int64
	ModTime     time.Time
	ContentType string
	// MD5 is the content's MD5 when the store knows it without reading the
	// object (S3 for single-part uploads); nil otherwise (always for file
	// stores). Use Store.MD5 to get it in every case.
	MD5 []byte
}

// Stat returns the object's attributes.
func (s *Store) Stat(ctx context.Context, key string) (Attributes, error) {
	if err := s.check(key); err != nil {
		return Attributes{}, err
	}
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return Attributes{}, s.wrap("stat", key, err)
	}
	out := Attributes{Size: a.Size, ModTime: a.ModTime, MD5: a.MD5, ContentType: a.ContentType}
	if s.kind == KindFile {
		out.ContentType, out.MD5 = typeByName(key), nil
	}
	return out, nil
}

// MD5 returns the object's MD5, from the store's attributes when it has
// them and by reading the object otherwise.
func (s *Store) MD5(ctx context.Context, key string) ([]byte, error) {
	a, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if len(a.MD5) == md5.Size {
		return a.MD5, nil
	}
	r, err := s.NewReader(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := md5.New()
	if _, err := io.Copy(h, r); err != nil {
		return nil, s.wrap("read", key, err)
	}
	return h.Sum(nil), nil
}

// Object is one List result.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// List yields the objects whose keys start with prefix ("" for all), in
// key order. Iteration stops at the first error, which is yielded.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		if err := ValidatePrefix(prefix); err != nil {
			yield(Object{}, err)
			return
		}
		it := s.bucket.List(&gcblob.ListOptions{Prefix: prefix})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(Object{}, s.wrap("list", prefix, err))
				return
			}
			if o.IsDir {
				continue
			}
			if !yield(Object{Key: o.Key, Size: o.Size, ModTime: o.ModTime}, nil) {
				return
			}
		}
	}
}

// Reader streams an object. It is an io.ReadSeekCloser, so it can be
// handed to http.ServeContent.
type Reader struct {
	r           *gcblob.Reader
	contentType string
}

// NewReader opens key for reading; the caller must Close it.
func (s *Store) NewReader(ctx context.Context, key string) (*Reader, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	ct := r.ContentType()
	if s.kind == KindFile || ct == "" {
		ct = typeByName(key)
	}
	return &Reader{r: r, contentType: ct}, nil
}

func (r *Reader) Read(p []byte) (int, error)                { return r.r.Read(p) }
func (r *Reader) Seek(off int64, whence int) (int64, error) { return r.r.Seek(off, whence) }
func (r *Reader) Close() error                              { return r.r.Close() }
func (r *Reader) Size() int64                               { return r.r.Size() }
func (r *Reader) ModTime() time.Time                        { return r.r.ModTime() }
func (r *Reader) ContentType() string                       { return r.contentType }
func (r *Reader) WriteTo(w io.Writer) (int64, error)        { return r.r.WriteTo(w) }
func typeByName(key string) string {
	if t := mime.TypeByExtension(path.Ext(key)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Writer streams an object into the store. Nothing is visible under the
// key until Close succeeds; Abort (or a failed Close) leaves any previous
// object in place.
type Writer struct {
	s   *Store
	key string
	out sink
	// createOnly: the write was opened with IfNotExist.
	createOnly bool
	want       []byte
	h          hash.Hash
	n          int64
	done       bool
	sum        []byte
}

// NewWriter starts writing key. The caller must call Close (to commit) or
// Abort (to discard).
func (s *Store) NewWriter(ctx context.Context, key string, opts *WriteOptions) (*Writer, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &WriteOptions{}
	}
	if len(opts.ContentMD5) != 0 && len(opts.ContentMD5) != md5.Size {
		return nil, errs.Invalidf("content MD5 must be %d bytes, got %d", md5.Size, len(opts.ContentMD5))
	}
	var out sink
	if opts.IfNotExist && s.kind == KindFile {
		// fileblob's own IfNotExist is a stat then a rename, which only
		// excludes writers in this process.
		f, err := newExclusiveFile(ctx, s.filePath(key))
		if err != nil {
			return nil, s.wrap("write", key, err)
		}
		out = f
	} else {
		ctx, cancel := context.WithCancel(ctx)
		emulated := opts.IfNotExist && s.createOnlyEmulated()
		gopts := &gcblob.WriterOptions{ContentMD5: opts.ContentMD5, IfNotExist: opts.IfNotExist && !emulated}
		if opts.ContentType != "" {
			if _, _, err := mime.ParseMediaType(opts.ContentType); err == nil {
				gopts.ContentType = opts.ContentType
			}
		}
		if gopts.ContentType == "" {
			gopts.ContentType = typeByName(key)
		}
		w, err := s.bucket.NewWriter(ctx, key, gopts)
		if err != nil {
			cancel()
			return nil, s.wrap("write", key, err)
		}
		bs := &bucketSink{w: w, cancel: cancel}
		if emulated {
			bs.exists = func() (bool, error) { return s.bucket.Exists(ctx, key) }
		}
		out = bs
	}
	return &Writer{s: s, key: key, out: out, createOnly: opts.IfNotExist, want: bytes.Clone(opts.ContentMD5), h: md5.New()}, nil
}

// Write implements io.Writer.
func (w *Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("blob write %q: writer already closed", w.key)
	}
	n, err := w.out.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	if err != nil {
		return n, w.s.wrap("write", w.key, err)
	}
	return n, nil
}

// Close commits the object. If an expected MD5 was given and the bytes do
// not match it, nothing is stored and ErrContentMD5Mismatch is returned.
func (w *Writer) Close() error {
	if w.done {
		return nil
	}
	w.sum = w.h.Sum(nil)
	if len(w.want) > 0 && !bytes.Equal(w.sum, w.want) {
		w.Abort()
		return fmt.Errorf("object %q: %w", w.key, ErrContentMD5Mismatch)
	}
	w.done = true
	err := w.out.commit()
	if w.createOnly && (errors.Is(err, ErrObjectExists) || gcerrors.Code(err) == gcerrors.FailedPrecondition) {
		return fmt.Errorf("object %q: %w", w.key, ErrObjectExists)
	}
	return w.s.wrap("write", w.key, err)
}

// Abort discards everything written; it is a no-op after Close.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.out.discard()
}

// Written is the number of bytes written so far.
func (w *Writer) Written() int64 { return w.n }

// MD5 is the MD5 of what was written; valid after Close.
func (w *Writer) MD5() []byte { return w.sum }
