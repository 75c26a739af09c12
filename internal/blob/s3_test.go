package blob_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/s3test"
)

func TestS3StoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	s := srv.Open(t, "data/v1")
	if s.Kind() != blob.KindS3 {
		t.Fatalf("Kind = %s", s.Kind())
	}
	const key = "runs/p/d/r1/a0/0/outputs.pb"
	if err := s.Put(ctx, key, []byte("outputs"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, key); err != nil || string(got) != "outputs" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	uri := s.URI(key)
	if uri != "s3://flyte/data/v1/"+key {
		t.Fatalf("URI = %s", uri)
	}
	if k, err := s.Key(uri); err != nil || k != key {
		t.Fatalf("Key(%s) = %q, %v", uri, k, err)
	}
	if _, err := s.Key("s3://other/data/v1/" + key); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("Key of another bucket = %v, want ErrInvalid", err)
	}
	sum, err := s.MD5(ctx, key)
	if want := md5.Sum([]byte("outputs")); err != nil || !bytes.Equal(sum, want[:]) {
		t.Fatalf("MD5 = %x, %v", sum, err)
	}
	var keys []string
	for o, err := range s.List(ctx, "runs/") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	if len(keys) != 1 || keys[0] != key {
		t.Fatalf("List = %q", keys)
	}
	// The prefix is the store's: the same bucket without it sees the key under it.
	whole := srv.Open(t, "")
	if ok, err := whole.Exists(ctx, "data/v1/"+key); !ok || err != nil {
		t.Fatalf("object not under the prefix in the bucket: %v, %v", ok, err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
}

func TestS3CreateOnlyWrites(t *testing.T) {
	ctx := context.Background()
	s := s3test.Start(t).Open(t, "")
	if err := s.CheckConditionalWrites(ctx); err != nil {
		t.Fatalf("probe on a store with conditional writes: %v", err)
	}
	const key = "race/obj"
	const writers = 6
	var wg sync.WaitGroup
	results := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Put(ctx, key, []byte(fmt.Sprintf("writer %d", i)), &blob.WriteOptions{IfNotExist: true})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, blob.ErrObjectExists):
			t.Fatalf("writer %d: %v, want success or ErrObjectExists", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers created the object, want 1", won)
	}
	// The probe leaves nothing behind.
	for o, err := range s.List(ctx, blob.ProbePrefix) {
		t.Fatalf("probe object left: %v %v", o.Key, err)
	}
}

// TestS3WithoutConditionalWrites: a store that ignores If-None-Match is
// refused by the probe, unless emulation is asked for, which then refuses
// a create-only write over an existing object by looking first.
func TestS3WithoutConditionalWrites(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t, s3test.WithoutConditionalWrites())
	s := srv.Open(t, "")
	if err := s.CheckConditionalWrites(ctx); !errors.Is(err, blob.ErrNoConditionalWrites) {
		t.Fatalf("probe = %v, want ErrNoConditionalWrites", err)
	}
	o := srv.Options()
	o.EmulateConditionalWrites = true
	em, err := blob.OpenWith(ctx, srv.StorageURL(""), blob.Options{S3: o})
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	if err := em.CheckConditionalWrites(ctx); err != nil {
		t.Fatalf("probe with emulation = %v", err)
	}
	if err := em.Put(ctx, "k", []byte("first"), &blob.WriteOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
	if err := em.Put(ctx, "k", []byte("second"), &blob.WriteOptions{IfNotExist: true}); !errors.Is(err, blob.ErrObjectExists) {
		t.Fatalf("emulated create-only over an object = %v, want ErrObjectExists", err)
	}
	if got, _ := em.Get(ctx, "k"); string(got) != "first" {
		t.Fatalf("object = %q, want it unchanged", got)
	}
}

func TestS3Presign(t *testing.T) {
	ctx := context.Background()
	s := s3test.Start(t).Open(t, "pre")
	body := []byte("bundle bytes")
	sum := md5.Sum(body)
	p, err := s.Presign(ctx, http.MethodPut, "uploads/x/fast.tar.gz", time.Minute, &blob.PresignOptions{ContentMD5: sum[:], IfNotExist: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.URL, "X-Amz-Signature=") || p.Headers["Content-Md5"] == "" || p.Headers["If-None-Match"] != "*" {
		t.Fatalf("presigned PUT = %+v, want a signed URL with Content-MD5 and If-None-Match headers", p)
	}
	put := func(b []byte) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.URL, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range p.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put([]byte("other bytes!")); code != http.StatusBadRequest {
		t.Fatalf("PUT of other bytes = %d, want 400 (the MD5 is bound)", code)
	}
	if code := put(body); code != http.StatusOK {
		t.Fatalf("PUT = %d, want 200", code)
	}
	if code := put(body); code != http.StatusPreconditionFailed {
		t.Fatalf("second PUT = %d, want 412 (create-only)", code)
	}
	g, err := s.Presign(ctx, http.MethodGet, "uploads/x/fast.tar.gz", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("GET = %d %q", resp.StatusCode, got)
	}
	mem, _ := blob.Open(ctx, "mem://")
	if _, err := mem.Presign(ctx, http.MethodGet, "k", time.Minute, nil); !errors.Is(err, errs.ErrPrecondition) {
		t.Fatalf("Presign on a memory store = %v, want ErrPrecondition", err)
	}
}

func TestS3Credentials(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	o := srv.Options()
	o.AccessKeyID = "someone-else"
	s, err := blob.OpenWith(ctx, srv.StorageURL(""), blob.Options{S3: o})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckConditionalWrites(ctx); err == nil || srv.Denied() == 0 {
		t.Fatalf("probe with a wrong access key = %v (%d denied), want an error", err, srv.Denied())
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", o, o, o), s3test.SecretAccessKey) {
		t.Fatal("S3Options prints its secret key")
	}
	o.SecretAccessKey = ""
	if _, err := blob.OpenWith(ctx, srv.StorageURL(""), blob.Options{S3: o}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("access key without secret = %v, want ErrInvalid", err)
	}
	if _, err := blob.OpenWith(ctx, srv.StorageURL("")+"?region=x", blob.Options{S3: o}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("URL with query = %v, want ErrInvalid", err)
	}
}
