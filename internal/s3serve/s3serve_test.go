package s3serve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/s3serve"
)

const (
	bucket    = "flyte"
	accessKey = "test-access"
	secretKey = "test-secret-not-real"
)

type fixture struct {
	store *blob.Store
	dir   string
	url   string
	s3    *s3.Client
}

func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, nil)
}

func startWith(t *testing.T, readOnly []string) *fixture {
	t.Helper()
	return startOpts(t, s3serve.Options{ReadOnly: readOnly})
}

// startOpts starts a server with o, its bucket, key and staging directory
// the fixture's.
func startOpts(t *testing.T, o s3serve.Options) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := blob.Open(context.Background(), "file://"+filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	o.Bucket, o.Keys, o.StagingDir = bucket, map[string]string{accessKey: secretKey}, filepath.Join(dir, "staging")
	srv, err := s3serve.New(st, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &fixture{store: st, dir: dir, url: hs.URL, s3: client(hs.URL, accessKey, secretKey)}
}

func client(endpoint, key, secret string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint:               aws.String(endpoint),
		Region:                     "us-east-1",
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(key, secret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           1,
	})
}

func (f *fixture) put(t *testing.T, key, body string) {
	t.Helper()
	if _, err := f.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func (f *fixture) get(t *testing.T, key string, rng string) (string, error) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := f.s3.GetObject(context.Background(), in)
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestObjects(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.put(t, "runs/a/outputs.pb", "hello, world")
	if got, err := f.get(t, "runs/a/outputs.pb", ""); err != nil || got != "hello, world" {
		t.Fatalf("get = %q, %v", got, err)
	}
	if got, err := f.get(t, "runs/a/outputs.pb", "bytes=7-"); err != nil || got != "world" {
		t.Fatalf("ranged get = %q, %v", got, err)
	}
	// The object is a plain file in the store.
	if b, err := os.ReadFile(filepath.Join(f.store.Dir(), "runs/a/outputs.pb")); err != nil || string(b) != "hello, world" {
		t.Fatalf("file = %q, %v", b, err)
	}
	head, err := f.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/a/outputs.pb")})
	if err != nil || aws.ToInt64(head.ContentLength) != 12 || aws.ToString(head.ETag) == "" {
		t.Fatalf("head = %+v, %v", head, err)
	}
	if _, err := f.get(t, "runs/missing", ""); code(err) != "NoSuchKey" {
		t.Fatalf("get of a missing key: %v", err)
	}
	if _, err := f.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/missing")}); code(err) != "NotFound" {
		t.Fatalf("head of a missing key: %v", err)
	}

	// Create-only writes.
	_, err = f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/a/outputs.pb"), Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")})
	if code(err) != "PreconditionFailed" {
		t.Fatalf("create-only put over an object: %v", err)
	}

	// Copy, then delete one and many.
	if _, err := f.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/b/copy"), CopySource: aws.String(bucket + "/runs/a/outputs.pb")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.get(t, "runs/b/copy", ""); got != "hello, world" {
		t.Fatalf("copy = %q", got)
	}
	if _, err := f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/b/copy")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/b/copy")}); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	f.put(t, "d/1", "1")
	f.put(t, "d/2", "2")
	del, err := f.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("d/1")}, {Key: aws.String("d/2")}, {Key: aws.String("../x")}}}})
	if err != nil || len(del.Deleted) != 2 || len(del.Errors) != 1 || aws.ToString(del.Errors[0].Code) != "InvalidArgument" {
		t.Fatalf("delete objects = %+v, %v", del, err)
	}
	if ok, _ := f.store.Exists(ctx, "d/1"); ok {
		t.Fatal("d/1 still exists")
	}
	if _, err := f.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("other"), Key: aws.String("k")}); code(err) != "NoSuchBucket" {
		t.Fatalf("another bucket: %v", err)
	}
}

func TestList(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	keys := []string{"a/1", "a/2", "a/b/3", "a/b/4", "a/c", "a-x", "b"}
	for _, k := range keys {
		f.put(t, k, k)
	}
	list := func(prefix, delim string, max int32) (objs, prefixes []string) {
		t.Helper()
		in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
		if delim != "" {
			in.Delimiter = aws.String(delim)
		}
		if max > 0 {
			in.MaxKeys = aws.Int32(max)
		}
		p := s3.NewListObjectsV2Paginator(f.s3, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if max > 0 && int32(len(page.Contents)+len(page.CommonPrefixes)) > max {
				t.Fatalf("page of %d items over max-keys %d", len(page.Contents)+len(page.CommonPrefixes), max)
			}
			for _, o := range page.Contents {
				objs = append(objs, aws.ToString(o.Key))
			}
			for _, c := range page.CommonPrefixes {
				prefixes = append(prefixes, aws.ToString(c.Prefix))
			}
		}
		return objs, prefixes
	}
	for _, tc := range []struct {
		prefix, delim string
		max           int32
		objs, pfx     string
	}{
		{"", "", 0, "a-x a/1 a/2 a/b/3 a/b/4 a/c b", ""},
		{"", "", 2, "a-x a/1 a/2 a/b/3 a/b/4 a/c b", ""},
		{"", "/", 0, "a-x b", "a/"},
		{"a/", "/", 0, "a/1 a/2 a/c", "a/b/"},
		{"a/", "/", 1, "a/1 a/2 a/c", "a/b/"},
		{"a/b", "", 0, "a/b/3 a/b/4", ""},
		{"a", "/", 1, "a-x", "a/"},
		{"zz/", "", 0, "", ""},
		{"../", "", 0, "", ""},
	} {
		objs, pfx := list(tc.prefix, tc.delim, tc.max)
		if strings.Join(objs, " ") != tc.objs || strings.Join(pfx, " ") != tc.pfx {
			t.Errorf("list(%q, %q, %d) = %v %v, want %s | %s", tc.prefix, tc.delim, tc.max, objs, pfx, tc.objs, tc.pfx)
		}
	}
	// ListObjects (v1) too.
	out, err := f.s3.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(bucket), Prefix: aws.String("a/"), Delimiter: aws.String("/")})
	if err != nil || len(out.Contents) != 3 || len(out.CommonPrefixes) != 1 {
		t.Fatalf("list v1 = %+v, %v", out, err)
	}
}

func TestMultipart(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	key := aws.String("big/file.bin")
	up, err := f.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	parts := []string{strings.Repeat("a", 6<<20), strings.Repeat("b", 1000)}
	var done []types.CompletedPart
	for i, p := range parts {
		out, err := f.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)), Body: strings.NewReader(p)})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
	}
	if ok, _ := f.store.Exists(ctx, *key); ok {
		t.Fatal("the object is visible before the upload completes")
	}
	if _, err := f.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatal(err)
	}
	got, err := f.get(t, *key, "")
	if err != nil || got != parts[0]+parts[1] {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
	// The staging area is empty again; a finished upload is gone.
	if left, _ := os.ReadDir(filepath.Join(f.dir, "staging")); len(left) != 0 {
		t.Fatalf("staging holds %d entries", len(left))
	}
	_, err = f.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(3), Body: strings.NewReader("x")})
	if code(err) != "NoSuchUpload" {
		t.Fatalf("part of a completed upload: %v", err)
	}

	// Abort drops the parts; a wrong ETag is refused.
	up, err = f.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	_, err = f.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: aws.String(`"00"`), PartNumber: aws.Int32(1)}}}})
	if code(err) != "InvalidPart" {
		t.Fatalf("complete with a wrong ETag: %v", err)
	}
	if _, err := f.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: key, UploadId: up.UploadId}); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(f.dir, "staging")); len(left) != 0 {
		t.Fatalf("staging holds %d entries after abort", len(left))
	}
	if got, _ := f.get(t, *key, ""); got != parts[0]+parts[1] {
		t.Fatal("abort changed the object")
	}
}

// xmlCode is the Code of an S3 XML error body.
func xmlCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(b)
	i, j := strings.Index(s, "<Code>"), strings.Index(s, "</Code>")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml") || i < 0 || j < i {
		t.Fatalf("not an S3 XML error: %d %q", resp.StatusCode, s)
	}
	return s[i+len("<Code>") : j]
}

func TestAuthentication(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.put(t, "k", "secret data")

	// Unsigned.
	resp, err := http.Get(f.url + "/" + bucket + "/k")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusForbidden || xmlCode(t, resp) != "AccessDenied" {
		t.Fatalf("unsigned GET answered %d", resp.StatusCode)
	}
	// A wrong secret, an unknown key.
	if _, err := client(f.url, accessKey, "wrong").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}); code(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := client(f.url, "nobody", secretKey).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}); code(err) != "InvalidAccessKeyId" {
		t.Fatalf("unknown key: %v", err)
	}
	// A signed request whose body was changed on the way.
	req, _ := http.NewRequest(http.MethodPut, f.url+"/"+bucket+"/k", strings.NewReader("public data"))
	signPut(t, f, req, "secret data")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if c := xmlCode(t, resp); resp.StatusCode != http.StatusBadRequest || c != "XAmzContentSHA256Mismatch" {
		t.Fatalf("tampered body: %d %s", resp.StatusCode, c)
	}
	if got, _ := f.get(t, "k", ""); got != "secret data" {
		t.Fatalf("tampered body was stored: %q", got)
	}

	// Presigned URLs work, and expire.
	pc := s3.NewPresignClient(f.s3, s3.WithPresignExpires(time.Minute))
	p, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "secret data" {
		t.Fatalf("presigned GET: %d %q", resp.StatusCode, b)
	}
	resp, err = http.Get(strings.Replace(p.URL, "X-Amz-Signature=", "X-Amz-Signature=0", 1))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusForbidden || xmlCode(t, resp) != "SignatureDoesNotMatch" {
		t.Fatalf("a changed presigned URL answered %d", resp.StatusCode)
	}
}

// signPut signs req as the S3 client would for a PUT of signedBody.
func signPut(t *testing.T, f *fixture, req *http.Request, signedBody string) {
	t.Helper()
	// Let the client sign a request with signedBody, then copy its
	// signature onto req.
	var captured http.Header
	var capturedURL *url.URL
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(f.url), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		HTTPClient: clientFunc(func(r *http.Request) (*http.Response, error) {
			captured, capturedURL = r.Header.Clone(), r.URL
			return nil, fmt.Errorf("captured")
		}),
		RetryMaxAttempts: 1,
	})
	_, _ = c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader([]byte(signedBody))})
	if captured == nil {
		t.Fatal("no request captured")
	}
	for k, v := range captured {
		req.Header[k] = v
	}
	req.URL = capturedURL
}

type clientFunc func(*http.Request) (*http.Response, error)

func (f clientFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestLoadOrCreateKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	id, secret, err := s3serve.LoadOrCreateKey(p)
	if err != nil || len(id) != 20 || len(secret) != 40 {
		t.Fatalf("new key = %q (%d), %d chars, %v", id, len(id), len(secret), err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	id2, secret2, err := s3serve.LoadOrCreateKey(p)
	if err != nil || id2 != id || secret2 != secret {
		t.Fatal("the key changed when read again")
	}
}

// Under a read-only prefix the endpoint reads, and refuses every write.
func TestReadOnlyPrefixes(t *testing.T) {
	f := startWith(t, []string{"uploads/"})
	ctx := context.Background()
	if err := f.store.Put(ctx, "uploads/p/bundle.tgz", []byte("code"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := f.get(t, "uploads/p/bundle.tgz", ""); err != nil || got != "code" {
		t.Fatalf("read under a read-only prefix: %q, %v", got, err)
	}
	key := aws.String("uploads/p/bundle.tgz")
	for name, op := range map[string]func() error{
		"put": func() error {
			_, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: key, Body: strings.NewReader("evil")})
			return err
		},
		"copy": func() error {
			f.put(t, "mine", "evil")
			_, err := f.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: key, CopySource: aws.String(bucket + "/mine")})
			return err
		},
		"delete": func() error {
			_, err := f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: key})
			return err
		},
		"multipart": func() error {
			_, err := f.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: key})
			return err
		},
	} {
		if err := op(); code(err) != "AccessDenied" {
			t.Errorf("%s under a read-only prefix: %v, want AccessDenied", name, err)
		}
	}
	del, err := f.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: key}}}})
	if err != nil || len(del.Errors) != 1 || aws.ToString(del.Errors[0].Code) != "AccessDenied" {
		t.Errorf("delete objects under a read-only prefix: %+v, %v", del, err)
	}
	if got, _ := f.get(t, "uploads/p/bundle.tgz", ""); got != "code" {
		t.Fatalf("the object under a read-only prefix changed: %q", got)
	}
}
