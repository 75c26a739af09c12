package s3serve_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// No request reaches a file outside the store: not by "..", an absolute
// key or an escaped one, and not through a symbolic link a task left in
// the store.
func TestNoPathEscapes(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	outside := filepath.Join(f.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("do not serve"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := f.store.Dir()
	// blobs/../outside/secret, from the store's directory.
	for _, key := range []string{"../outside/secret", "a/../../outside/secret", "/" + filepath.Join(outside, "secret"), "./x", "a//b", `a\..\b`} {
		if _, err := f.get(t, key, ""); code(err) != "InvalidArgument" {
			t.Errorf("GET %q: %v, want InvalidArgument", key, err)
		}
		_, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("x")})
		if code(err) != "InvalidArgument" {
			t.Errorf("PUT %q: %v, want InvalidArgument", key, err)
		}
		_, err = f.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copied"), CopySource: aws.String(bucket + "/" + key)})
		if code(err) != "InvalidArgument" {
			t.Errorf("COPY from %q: %v, want InvalidArgument", key, err)
		}
	}
	// Escaped dots reach the server decoded, and are refused the same way.
	for _, p := range []string{"/" + bucket + "/%2e%2e/outside/secret", "/" + bucket + "/a/%2E%2E/%2E%2E/outside/secret"} {
		req, _ := http.NewRequest(http.MethodGet, f.url+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s answered 200", p)
		}
		resp.Body.Close()
	}

	// Links in the store: to a file and to a directory outside it.
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"link", "dirlink/secret"} {
		if got, err := f.get(t, key, ""); code(err) != "AccessDenied" {
			t.Errorf("GET %q through a link = %q, %v; want AccessDenied", key, got, err)
		}
		if _, err := f.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err == nil {
			t.Errorf("HEAD %q through a link succeeded", key)
		}
		if _, err := f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); code(err) != "AccessDenied" {
			t.Errorf("DELETE %q through a link: %v", key, err)
		}
	}
	_, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("dirlink/planted"), Body: strings.NewReader("x")})
	if code(err) != "AccessDenied" {
		t.Errorf("PUT through a directory link: %v", err)
	}
	up, err := f.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("dirlink/planted")})
	if code(err) != "AccessDenied" {
		t.Errorf("multipart upload through a directory link: %v %v", up, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a write through a link landed outside the store")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "do not serve" {
		t.Error("the file outside the store changed")
	}
	out, err := f.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if k := aws.ToString(o.Key); strings.Contains(k, "link") {
			t.Errorf("list shows %q", k)
		}
	}
}
