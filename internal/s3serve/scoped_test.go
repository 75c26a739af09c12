package s3serve_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fmgr.dev/internal/s3serve"
)

// An attempt's scoped key (what the manager gives a task of run r1 of
// project p): it writes only under its run's base, reads its project's
// runs, uploads and inputs, and nothing of project q; an expired key or
// one whose grant was edited is refused.
func TestScopedKeys(t *testing.T) {
	f := startOpts(t, s3serve.Options{ScopedMaster: secretKey, ReadOnly: []string{"uploads/"}})
	ctx := context.Background()
	for _, k := range []string{
		"runs/_/p/d/r1/a0/1/outputs.pb", "runs/_/p/d/r2/a0/1/outputs.pb", "runs/_/p/d/r2/a0/1/raw/f.txt",
		"runs/_/q/d/r9/a0/1/outputs.pb", "uploads/_/p/d/abc/code.tgz", "uploads/_/q/d/abc/code.tgz",
		"offloaded-inputs/_/p/d/h1/inputs.pb", "offloaded-inputs/_/q/d/h1/inputs.pb", "runs/_/p/d2/r3/a0/1/outputs.pb",
		"custom/h2/inputs.pb", "custom/h2/other.pb",
	} {
		if err := f.store.Put(ctx, k, []byte("data of "+k), nil); err != nil {
			t.Fatal(err)
		}
	}
	grant := s3serve.Grant{
		Read:    []string{"runs/_/p/d/", "uploads/_/p/d/", "offloaded-inputs/_/p/d"},
		Write:   []string{"runs/_/p/d/r1"},
		Files:   []string{"custom/h2/inputs.pb"},
		Expires: time.Now().Add(time.Hour),
	}
	id, secret := s3serve.ScopedKey(secretKey, grant)
	if strings.Contains(id, "/") || id == accessKey {
		t.Fatalf("scoped key ID %q is not usable in a SigV4 credential", id)
	}
	c := client(f.url, id, secret)
	get := func(key string) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			out.Body.Close()
		}
		return err
	}
	put := func(key string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("overwritten")})
		return err
	}
	del := func(key string) error {
		_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	}
	copyTo := func(src, dst string) error {
		_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(dst), CopySource: aws.String(bucket + "/" + src)})
		return err
	}

	// Own run: read and write, in every way.
	for what, err := range map[string]error{
		"put own output":           put("runs/_/p/d/r1/a0/1/outputs.pb"),
		"get own output":           get("runs/_/p/d/r1/a0/1/outputs.pb"),
		"copy same project's data": copyTo("runs/_/p/d/r2/a0/1/raw/f.txt", "runs/_/p/d/r1/a0/1/raw/copy.txt"),
		"delete own file":          del("runs/_/p/d/r1/a0/1/raw/copy.txt"),
		"read same project's run":  get("runs/_/p/d/r2/a0/1/outputs.pb"),
		"read own code bundle":     get("uploads/_/p/d/abc/code.tgz"),
		"read own inputs":          get("offloaded-inputs/_/p/d/h1/inputs.pb"),
		"read own inputs file":     get("custom/h2/inputs.pb"),
	} {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	mp, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("runs/_/p/d/r1/a0/1/raw/big")})
	if err != nil {
		t.Fatalf("multipart upload in own run: %v", err)
	}
	if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("runs/_/p/d/r1/a0/1/raw/big"), UploadId: mp.UploadId}); err != nil {
		t.Fatalf("aborting own multipart upload: %v", err)
	}

	// Everything else: AccessDenied, and nothing changed.
	_, mpErr := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("runs/_/p/d/r2/a0/1/outputs.pb")})
	delErrs, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("runs/_/p/d/r2/a0/1/outputs.pb")}}}})
	if err != nil || len(delErrs.Errors) != 1 || aws.ToString(delErrs.Errors[0].Code) != "AccessDenied" {
		t.Errorf("DeleteObjects of another run's output: %v %+v, want its key refused with AccessDenied", err, delErrs)
	}
	for what, err := range map[string]error{
		"overwrite another run's output":         put("runs/_/p/d/r2/a0/1/outputs.pb"),
		"delete another run's output":            del("runs/_/p/d/r2/a0/1/outputs.pb"),
		"multipart into another run":             mpErr,
		"copy into another run":                  copyTo("runs/_/p/d/r1/a0/1/outputs.pb", "runs/_/p/d/r2/a0/1/outputs.pb"),
		"copy out of another project":            copyTo("runs/_/q/d/r9/a0/1/outputs.pb", "runs/_/p/d/r1/a0/1/stolen"),
		"read another project's output":          get("runs/_/q/d/r9/a0/1/outputs.pb"),
		"read another domain's output":           get("runs/_/p/d2/r3/a0/1/outputs.pb"),
		"read another project's code":            get("uploads/_/q/d/abc/code.tgz"),
		"read another project's inputs":          get("offloaded-inputs/_/q/d/h1/inputs.pb"),
		"write own project's code (read-only)":   put("uploads/_/p/d/abc/code.tgz"),
		"write own project's inputs (read only)": put("offloaded-inputs/_/p/d/h1/inputs.pb"),
		"write outside every run":                put("elsewhere/x"),
		"read beside own inputs file":            get("custom/h2/other.pb"),
		"write own inputs file":                  put("custom/h2/inputs.pb"),
	} {
		if code(err) != "AccessDenied" {
			t.Errorf("%s: %v, want AccessDenied", what, err)
		}
	}
	for _, k := range []string{"runs/_/p/d/r2/a0/1/outputs.pb", "runs/_/q/d/r9/a0/1/outputs.pb", "offloaded-inputs/_/p/d/h1/inputs.pb"} {
		if got, err := f.get(t, k, ""); err != nil || got != "data of "+k {
			t.Errorf("%s after the refused writes: %q %v, want it unchanged", k, got, err)
		}
	}
	if _, err := f.get(t, "runs/_/p/d/r1/a0/1/stolen", ""); code(err) != "NoSuchKey" {
		t.Errorf("the refused copy left runs/_/p/d/r1/a0/1/stolen behind: %v", err)
	}

	// Lists: filtered to the grant, refused wholly outside it.
	list := func(prefix string) ([]string, error) {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		if err != nil {
			return nil, err
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys, nil
	}
	if _, err := list("runs/_/q/"); code(err) != "AccessDenied" {
		t.Errorf("listing another project's runs: %v, want AccessDenied", err)
	}
	keys, err := list("runs/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "runs/_/p/d/") {
			t.Errorf("listing runs/ showed %s, outside the key's project", k)
		}
	}
	if !slices.Contains(keys, "runs/_/p/d/r2/a0/1/outputs.pb") {
		t.Errorf("listing runs/ = %q, want the project's other run in it", keys)
	}

	// A grant edited by its holder (another run made writable) no longer
	// matches its secret; an expired key is refused.
	forged, _ := s3serve.ScopedKey(secretKey, s3serve.Grant{Read: grant.Read, Write: []string{"runs/"}, Expires: grant.Expires})
	fc := client(f.url, forged, secret)
	if _, err := fc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/_/p/d/r2/a0/1/outputs.pb"), Body: strings.NewReader("x")}); code(err) != "SignatureDoesNotMatch" {
		t.Errorf("a forged grant: %v, want SignatureDoesNotMatch", err)
	}
	otherMaster, otherSecret := s3serve.ScopedKey("another manager's secret", grant)
	if _, err := client(f.url, otherMaster, otherSecret).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/_/p/d/r1/a0/1/outputs.pb")}); err == nil {
		t.Error("a key derived from another master secret was accepted")
	}
	oldID, oldSecret := s3serve.ScopedKey(secretKey, s3serve.Grant{Read: grant.Read, Write: grant.Write, Expires: time.Now().Add(-time.Minute)})
	if _, err := client(f.url, oldID, oldSecret).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/_/p/d/r1/a0/1/outputs.pb")}); code(err) != "AccessDenied" {
		t.Errorf("an expired key: %v, want AccessDenied", err)
	}

	// Without ScopedMaster no scoped key is accepted.
	plain := start(t)
	plain.put(t, "runs/_/p/d/r1/x", "x")
	if _, err := client(plain.url, id, secret).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("runs/_/p/d/r1/x")}); code(err) != "InvalidAccessKeyId" {
		t.Errorf("a scoped key on an endpoint without scoped keys: %v, want InvalidAccessKeyId", err)
	}
}
