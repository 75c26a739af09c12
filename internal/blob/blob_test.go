package blob

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/internal/errs"
)

func openFileStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobs", "nested")
	s, err := Open(context.Background(), "file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

func TestValidateKey(t *testing.T) {
	good := []string{"a", "a/b/c.txt", "uploads/_/p/d/ABC/fast.tar.gz", "a b/ü.txt", "..a/b..c", strings.Repeat("x", 255)}
	for _, k := range good {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	bad := []string{
		"", "/abs", "a/../b", "..", "../a", "a/..", ".", "a/./b", "a//b", "a/", `a\b`, `..\a`,
		"a\x00b", "a\nb", "a\x7fb", "x/__0x2f__/y", "\xff\xfe",
		strings.Repeat("x", 256), strings.Repeat("a/", 600) + "a",
	}
	for _, k := range bad {
		err := ValidateKey(k)
		if !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalid", k, err)
		}
	}
}

func TestValidateName(t *testing.T) {
	if err := ValidateName("filename", "fast123.tar.gz"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"", "a/b", "..", ".", "/x", `a\b`, "a\x00"} {
		err := ValidateName("filename", n)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "filename") {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalid naming the field", n, err)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "a", "a/", "a/b/"} {
		if err := ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"/", "/a", "../", "a/../", "a//"} {
		if err := ValidatePrefix(p); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("ValidatePrefix(%q) = %v, want ErrInvalid", p, err)
		}
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"relative/dir", "file://host/dir", "file:///tmp/x?create_dir=1", "file:relative",
		"gs://bucket", "ftp://x", "s3://", "s3://bucket?prefix=a", "s3://bucket/../x",
	} {
		if _, err := Open(ctx, u); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", u, err)
		}
	}
}

func TestFileStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, dir := openFileStore(t)
	if s.Kind() != KindFile {
		t.Fatalf("Kind = %s", s.Kind())
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("Open did not create %s: %v", dir, err)
	}

	key := "runs/p/d/r1/a0/1/outputs.pb"
	data := []byte("hello outputs")
	if err := s.Put(ctx, key, data, nil); err != nil {
		t.Fatalf("Put: %v", err)
	}

	// URI is the absolute filesystem path, and the file holds the bytes.
	uri := s.URI(key)
	if want := filepath.Join(dir, "runs", "p", "d", "r1", "a0", "1", "outputs.pb"); uri != want {
		t.Fatalf("URI = %q, want %q", uri, want)
	}
	onDisk, err := os.ReadFile(uri)
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("file at URI: %q, %v", onDisk, err)
	}
	got, err := s.Get(ctx, key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, err)
	}

	// Key inverts URI, for paths and file:// URLs.
	for _, u := range []string{uri, "file://" + filepath.ToSlash(uri)} {
		k, err := s.Key(u)
		if err != nil || k != key {
			t.Fatalf("Key(%q) = %q, %v; want %q", u, k, err, key)
		}
	}

	// No sidecar files: a task listing the directory sees only its data.
	if files := filesUnder(t, dir); len(files) != 1 || files[0] != uri {
		t.Fatalf("files in store = %v, want only %s", files, uri)
	}

	// A file written directly by a task process is an object.
	ext := filepath.Join(dir, "runs", "p", "d", "r1", "a1", "1", "outputs.pb")
	if err := os.MkdirAll(filepath.Dir(ext), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ext, []byte("from a task"), 0o644); err != nil {
		t.Fatal(err)
	}
	extKey, err := s.Key(ext)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists(ctx, extKey); err != nil || !ok {
		t.Fatalf("Exists(%q) = %v, %v", extKey, ok, err)
	}
	sum, err := s.MD5(ctx, extKey)
	if want := md5.Sum([]byte("from a task")); err != nil || !bytes.Equal(sum, want[:]) {
		t.Fatalf("MD5 = %x, %v", sum, err)
	}

	var keys []string
	for o, err := range s.List(ctx, "runs/p/d/r1/") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "runs/p/d/r1/a0/1/outputs.pb,runs/p/d/r1/a1/1/outputs.pb" {
		t.Fatalf("List = %v", keys)
	}

	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, key); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Delete missing = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "nope"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Stat missing = %v, want ErrNotFound", err)
	}
}

func TestFileStoreKeyRejectsOutside(t *testing.T) {
	s, dir := openFileStore(t)
	for _, u := range []string{
		dir, dir + "/", filepath.Dir(dir), "/etc/passwd", dir + "/../x", dir + "/a/../../x",
		dir + "x/y", "relative/x", "file://other" + dir + "/a", "s3://bucket/a", dir + "/a.attrs",
		"file://" + dir + "/a?x=1",
	} {
		if k, err := s.Key(u); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Key(%q) = %q, %v; want ErrInvalid", u, k, err)
		}
	}
}

func TestFileStoreSymlinkedRoot(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("symlinks not available:", err)
	}
	s, err := Open(context.Background(), "file://"+link)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(link, "a/b"), filepath.Join(real, "a/b")} {
		if k, err := s.Key(p); err != nil || k != "a/b" {
			t.Errorf("Key(%q) = %q, %v", p, k, err)
		}
	}
}

func TestStoreRejectsBadKeys(t *testing.T) {
	ctx := context.Background()
	s, dir := openFileStore(t)
	for _, k := range []string{"../escape", "a/../../escape", "/etc/passwd", `..\x`, "a\x00", "x.attrs"} {
		if err := s.Put(ctx, k, []byte("x"), nil); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Put(%q) = %v, want ErrInvalid", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Get(%q) = %v, want ErrInvalid", k, err)
		}
		if _, err := s.NewReader(ctx, k); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("NewReader(%q) = %v, want ErrInvalid", k, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); !os.IsNotExist(err) {
		t.Fatalf("a traversal key wrote outside the store: %v", err)
	}
	var listed []error
	for _, err := range s.List(ctx, "../") {
		listed = append(listed, err)
	}
	if len(listed) != 1 || !errors.Is(listed[0], errs.ErrInvalid) {
		t.Fatalf("List(../) yielded errors %v, want exactly one ErrInvalid", listed)
	}
}

func TestWriterMD5MismatchStoresNothing(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"mem://", ""} {
		var s *Store
		var dir string
		if url == "" {
			s, dir = openFileStore(t)
		} else {
			var err error
			if s, err = Open(ctx, url); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(string(s.Kind()), func(t *testing.T) {
			key := "a/obj.bin"
			old := []byte("previous content")
			if err := s.Put(ctx, key, old, nil); err != nil {
				t.Fatal(err)
			}
			want := md5.Sum([]byte("the right bytes"))
			// Large enough to pass through the driver, small enough to be quick.
			body := bytes.Repeat([]byte("wrong bytes "), 10000)
			w, err := s.NewWriter(ctx, key, &WriteOptions{ContentMD5: want[:]})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(body); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); !errors.Is(err, ErrContentMD5Mismatch) || !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("Close = %v, want ErrContentMD5Mismatch", err)
			}
			if got, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, old) {
				t.Fatalf("after mismatch Get = %q, %v; want the previous content", got, err)
			}

			// Abort leaves nothing either.
			w, err = s.NewWriter(ctx, "a/aborted", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = w.Write([]byte("partial"))
			w.Abort()
			if ok, err := s.Exists(ctx, "a/aborted"); err != nil || ok {
				t.Fatalf("aborted object exists=%v err=%v", ok, err)
			}

			// A matching MD5 commits.
			good := []byte("the right bytes")
			w, err = s.NewWriter(ctx, key, &WriteOptions{ContentMD5: want[:], ContentType: "text/plain"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, bytes.NewReader(good)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.MD5(), want[:]) || w.Written() != int64(len(good)) {
				t.Fatalf("MD5 %x written %d", w.MD5(), w.Written())
			}
			r, err := s.NewReader(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			_ = r.Close()
			if !bytes.Equal(got, good) || r.Size() != int64(len(good)) {
				t.Fatalf("read back %q size %d", got, r.Size())
			}

			if dir != "" {
				// No temporary files are left behind: only the committed object.
				if files := filesUnder(t, dir); len(files) != 1 || files[0] != filepath.Join(dir, "a", "obj.bin") {
					t.Fatalf("files in store = %v, want only a/obj.bin", files)
				}
			}
		})
	}
}

func TestMemStoreURI(t *testing.T) {
	s, err := Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.URI("a/b"); got != "mem:///a/b" {
		t.Fatalf("URI = %q", got)
	}
	if k, err := s.Key("mem:///a/b"); err != nil || k != "a/b" {
		t.Fatalf("Key = %q, %v", k, err)
	}
	for _, u := range []string{"mem:///", "mem:///../a", "s3://b/a", "/a/b"} {
		if _, err := s.Key(u); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Key(%q) = %v, want ErrInvalid", u, err)
		}
	}
}

// filesUnder lists every regular file below dir, failing the test if the
// walk cannot read a directory (which would otherwise look like "no files").
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return files
}

// A file store with an S3 alias names its objects s3://<bucket>/<key>,
// and still knows the paths it handed out before.
func TestFileAlias(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenWith(context.Background(), "file://"+dir, Options{FileAlias: "s3://flyte"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.URI("o/p/outputs.pb"); got != "s3://flyte/o/p/outputs.pb" {
		t.Fatalf("URI = %q", got)
	}
	if s.Dir() != dir {
		t.Fatalf("Dir = %q, want %q", s.Dir(), dir)
	}
	// Writes (create-only ones too) land in the directory.
	for _, o := range []*WriteOptions{nil, {IfNotExist: true}} {
		if err := s.Put(context.Background(), "o/p/outputs.pb", []byte("x"), o); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "o/p/outputs.pb")); err != nil || string(b) != "x" {
			t.Fatalf("the object is not in the store's directory: %q, %v", b, err)
		}
		if err := s.Delete(context.Background(), "o/p/outputs.pb"); err != nil {
			t.Fatal(err)
		}
	}
	for _, uri := range []string{"s3://flyte/o/p/outputs.pb", dir + "/o/p/outputs.pb", "file://" + dir + "/o/p/outputs.pb"} {
		if k, err := s.Key(uri); err != nil || k != "o/p/outputs.pb" {
			t.Errorf("Key(%q) = %q, %v", uri, k, err)
		}
	}
	for _, uri := range []string{"s3://other/o", "s3://flyte/../x", "s3://flyte/"} {
		if _, err := s.Key(uri); err == nil {
			t.Errorf("Key(%q) accepted", uri)
		}
	}
	for _, bad := range []string{"flyte", "s3://", "s3://a/b"} {
		if _, err := OpenWith(context.Background(), "file://"+dir, Options{FileAlias: bad}); err == nil {
			t.Errorf("alias %q accepted", bad)
		}
	}
}
