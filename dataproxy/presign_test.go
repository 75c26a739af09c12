package dataproxy_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/internal/s3test"
)

// TestPresignedUploads: with storage.s3.presignedURLs the SDK uploads
// straight to the store: the URL binds the content MD5, is create-only
// while nothing is at the location, and a second request for the same
// content may upload it again; different content at a named location is
// refused before any URL is issued.
func TestPresignedUploads(t *testing.T) {
	srv := s3test.Start(t)
	h := newHarness(t, withPresigningStore(srv.Open(t, "fm")))
	content := []byte("a,b\n1,2\n")
	up := h.createUpload(rootedUpload(content, true))
	if !strings.HasPrefix(up.GetSignedUrl(), srv.URL+"/") || !strings.Contains(up.GetSignedUrl(), "X-Amz-Signature=") {
		t.Fatalf("signed URL %s, want one presigned for the S3 server", up.GetSignedUrl())
	}
	if up.GetHeaders()["If-None-Match"] != "*" {
		t.Fatalf("headers %v, want If-None-Match: * (nothing is there yet)", up.GetHeaders())
	}
	if !strings.HasPrefix(up.GetNativeUrl(), "s3://flyte/fm/uploads/") {
		t.Fatalf("native URL %s", up.GetNativeUrl())
	}
	if code, body := h.putLikeSDK(up, content, []byte("a,b\n6,6\n")); code != http.StatusBadRequest {
		t.Fatalf("PUT of other bytes = %d %s, want 400", code, body)
	}
	if code, body := h.putLikeSDK(up, content, content); code != http.StatusOK {
		t.Fatalf("PUT = %d %s", code, body)
	}
	if code, _ := h.putLikeSDK(up, content, content); code != http.StatusPreconditionFailed {
		t.Fatalf("second PUT through the create-only URL = %d, want 412", code)
	}
	again := h.createUpload(rootedUpload(content, true))
	if _, ok := again.GetHeaders()["If-None-Match"]; ok {
		t.Fatalf("headers %v: the same content is there, the URL may write it again", again.GetHeaders())
	}
	if code, body := h.putLikeSDK(again, content, content); code != http.StatusOK {
		t.Fatalf("PUT of the same content again = %d %s", code, body)
	}
	key, err := h.store.Key(up.GetNativeUrl())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.store.Get(context.Background(), key); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("stored %q, %v", got, err)
	}
	_, err = h.dp.CreateUploadLocation(context.Background(), connect.NewRequest(rootedUpload([]byte("other"), true)))
	if connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("other content at the named location = %v, want AlreadyExists", err)
	}
}
