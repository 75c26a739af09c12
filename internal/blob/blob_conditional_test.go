package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"fmgr.dev/internal/errs"
)

// conditionalStores are the drivers a create-only write is tested on.
func conditionalStores(t *testing.T) map[string]*Store {
	t.Helper()
	fs, _ := openFileStore(t)
	mem, err := Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	return map[string]*Store{"file": fs, "mem": mem}
}

func TestCreateOnlyWriteKeepsExistingObject(t *testing.T) {
	ctx := context.Background()
	for name, s := range conditionalStores(t) {
		t.Run(name, func(t *testing.T) {
			const key = "uploads/_/p/d/root/data.bin"
			createOnly := &WriteOptions{IfNotExist: true}
			if err := s.Put(ctx, key, []byte("first"), createOnly); err != nil {
				t.Fatalf("create-only write of a new key: %v", err)
			}
			err := s.Put(ctx, key, []byte("second"), createOnly)
			if !errors.Is(err, ErrObjectExists) || !errors.Is(err, errs.ErrAlreadyExists) {
				t.Fatalf("create-only write over an object = %v, want ErrObjectExists (an ErrAlreadyExists)", err)
			}
			if got, err := s.Get(ctx, key); err != nil || string(got) != "first" {
				t.Fatalf("object after the refused write = %q, %v; want it unchanged", got, err)
			}
			// A plain write still replaces: only writes that ask are create-only.
			if err := s.Put(ctx, key, []byte("third"), nil); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx, key); string(got) != "third" {
				t.Fatalf("plain write = %q, want it to replace the object", got)
			}
			var keys []string
			for o, err := range s.List(ctx, "uploads/") {
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, o.Key)
			}
			if len(keys) != 1 || keys[0] != key {
				t.Fatalf("store holds %q, want only %q (no temporary files left behind)", keys, key)
			}
		})
	}
}

// TestCreateOnlyWriteChecksAtCommit: the object appears after the write was
// opened, written by someone else than this Store (a task, another manager),
// as a file in the store's directory.
func TestCreateOnlyWriteChecksAtCommit(t *testing.T) {
	ctx := context.Background()
	s, _ := openFileStore(t)
	const key = "a/late.txt"
	w, err := s.NewWriter(ctx, key, &WriteOptions{IfNotExist: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("stale upload")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.URI(key), []byte("written meanwhile"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrObjectExists) {
		t.Fatalf("Close = %v, want ErrObjectExists", err)
	}
	if got, err := os.ReadFile(s.URI(key)); err != nil || string(got) != "written meanwhile" {
		t.Fatalf("file = %q, %v; want the other writer's content", got, err)
	}
	entries, err := os.ReadDir(filepath.Dir(s.URI(key)))
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v), want only the file", entries, err)
	}
}

func TestCreateOnlyWritesRaceToOneWinner(t *testing.T) {
	ctx := context.Background()
	for name, s := range conditionalStores(t) {
		t.Run(name, func(t *testing.T) {
			const key = "race/obj"
			const writers = 8
			var wg sync.WaitGroup
			results := make([]error, writers)
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = s.Put(ctx, key, []byte(fmt.Sprintf("writer %d", i)), &WriteOptions{IfNotExist: true})
				}()
			}
			wg.Wait()
			winner := -1
			for i, err := range results {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("writers %d and %d both created %s", winner, i, key)
				case err == nil:
					winner = i
				case !errors.Is(err, ErrObjectExists):
					t.Fatalf("writer %d: %v, want success or ErrObjectExists", i, err)
				}
			}
			if winner < 0 {
				t.Fatal("no writer created the object")
			}
			if got, _ := s.Get(ctx, key); !bytes.Equal(got, []byte(fmt.Sprintf("writer %d", winner))) {
				t.Fatalf("object = %q, want writer %d's content", got, winner)
			}
		})
	}
}

func TestCreateOnlyWriteAbortLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openFileStore(t)
	w, err := s.NewWriter(ctx, "a/b", &WriteOptions{IfNotExist: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	entries, err := os.ReadDir(filepath.Dir(s.URI("a/b")))
	if err != nil || len(entries) != 0 {
		t.Fatalf("after Abort the directory holds %v (%v), want nothing", entries, err)
	}
	// MD5 mismatch on a create-only write: nothing becomes visible either.
	w, err = s.NewWriter(ctx, "a/b", &WriteOptions{IfNotExist: true, ContentMD5: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("x"))
	if err := w.Close(); !errors.Is(err, ErrContentMD5Mismatch) {
		t.Fatalf("Close = %v, want ErrContentMD5Mismatch", err)
	}
	if ok, err := s.Exists(ctx, "a/b"); ok || err != nil {
		t.Fatalf("Exists after a mismatched write = %v, %v", ok, err)
	}
}

// TestSegmentsEndingInDot: such a segment is not a portable file name, and
// in a file store "x../y" would not be stored at the native path URI hands
// to tasks (fileblob escapes the '/' after ".."). Leading dots are fine.
func TestSegmentsEndingInDot(t *testing.T) {
	for _, k := range []string{"x..", "a/x../b", "a/x.", "a.b./c", "uploads/_/p/d/root../f"} {
		err := ValidateKey(k)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "ending in '.'") {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalid about the trailing '.'", k, err)
		}
	}
	for _, field := range []string{"filename", "filename_root"} {
		err := ValidatePath(field, "dir../f")
		if !errors.Is(err, errs.ErrInvalid) || !strings.HasPrefix(err.Error(), field+" ") {
			t.Errorf("ValidatePath(%q, dir../f) = %v, want ErrInvalid naming the field", field, err)
		}
	}
	if err := ValidateName("filename", "x.."); !errors.Is(err, errs.ErrInvalid) || !strings.HasPrefix(err.Error(), "filename ") {
		t.Errorf("ValidateName(filename, x..) = %v, want ErrInvalid naming the field", err)
	}

	ctx := context.Background()
	s, _ := openFileStore(t)
	if err := s.Put(ctx, "a/x../b", []byte("x"), nil); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("Put(a/x../b) = %v, want ErrInvalid", err)
	}
	// Every key that passes is stored exactly at its native path.
	for _, k := range []string{"..x/.env", "a/..b/c..d", "a/.hidden"} {
		if err := s.Put(ctx, k, []byte(k), nil); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
		if got, err := os.ReadFile(s.URI(k)); err != nil || string(got) != k {
			t.Fatalf("native path of %q holds %q, %v", k, got, err)
		}
	}
}
