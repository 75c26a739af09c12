package blob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	gcblob "gocloud.dev/blob"
)

// sink is where a Writer's bytes go until commit makes them the object.
type sink interface {
	io.Writer
	commit() error
	discard()
}

// bucketSink writes through the gocloud driver.
type bucketSink struct {
	w      *gcblob.Writer
	cancel context.CancelFunc
	// exists, when set, is checked before commit: a create-only write on a
	// store that ignores If-None-Match (S3Options.EmulateConditionalWrites).
	exists func() (bool, error)
}

func (b *bucketSink) Write(p []byte) (int, error) { return b.w.Write(p) }

func (b *bucketSink) commit() error {
	if b.exists != nil {
		ok, err := b.exists()
		if err == nil && ok {
			err = ErrObjectExists
		}
		if err != nil {
			b.discard()
			return err
		}
	}
	defer b.cancel()
	return b.w.Close()
}

// discard cancels first: a gocloud writer closed with a live context
// would commit what it has.
func (b *bucketSink) discard() {
	b.cancel()
	_ = b.w.Close()
}

// exclusiveFile is a create-only write to a file store: the bytes go to a
// temporary file beside the target, and commit hard-links it to the
// target's name, which the kernel refuses atomically if the name exists.
// The target path is Store.filePath(key): ValidateKey rejects every key that
// fileblob would escape, so fileblob reads the object from that same path.
type exclusiveFile struct {
	ctx    context.Context
	f      *os.File
	target string
}

func newExclusiveFile(ctx context.Context, target string) (*exclusiveFile, error) {
	// 0777 before the umask, as DirFileMode.
	if err := os.MkdirAll(filepath.Dir(target), 0o777); err != nil {
		return nil, err
	}
	var suffix [8]byte
	for range 100 {
		_, _ = rand.Read(suffix[:])
		// Like fileblob's own temporaries: <target>.<hex>.tmp, 0666 before umask.
		f, err := os.OpenFile(target+"."+hex.EncodeToString(suffix[:])+".tmp", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &exclusiveFile{ctx: ctx, f: f, target: target}, nil
	}
	return nil, fmt.Errorf("no free temporary name beside %s", target)
}

func (e *exclusiveFile) Write(p []byte) (int, error) { return e.f.Write(p) }

func (e *exclusiveFile) commit() error {
	tmp := e.f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if err := e.f.Close(); err != nil {
		return err
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if err := os.Link(tmp, e.target); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrObjectExists
		}
		return err
	}
	return nil
}

func (e *exclusiveFile) discard() {
	_ = e.f.Close()
	_ = os.Remove(e.f.Name())
}
