package dataproxy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"strings"
	"testing"

	"connectrpc.com/connect"

	dp "fmgr.dev/gen/go/flyteidl2/dataproxy"
)

// Upload URLs are create-only at PUT time: the overwrite check made when a
// URL is issued is stale by the time an old URL is used, so the PUT itself
// must refuse to replace a file uploaded meanwhile.

// rootedUpload is what flyte.remote.upload_dir asks for: a caller-chosen
// directory (filename_root), with or without the content's MD5.
func rootedUpload(content []byte, withMD5 bool) *dp.CreateUploadLocationRequest {
	req := uploadReq(content, "data.csv")
	req.FilenameRoot = "4f1c2e/inputs"
	if !withMD5 {
		req.ContentMd5, req.AddContentMd5Metadata = nil, false
	}
	return req
}

func sameFile(t *testing.T, a, b os.FileInfo) bool {
	t.Helper()
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

func TestOldMD5BoundURLCannotReplaceAFileUploadedMeanwhile(t *testing.T) {
	h := newHarness(t)
	first, second := []byte("a,b\n1,2\n"), []byte("a,b\n3,4\n")
	// Both URLs are issued while nothing is at the location, so both pass
	// CreateUploadLocation's overwrite check.
	old := h.createUpload(rootedUpload(first, true))
	newer := h.createUpload(rootedUpload(second, true))
	if old.GetNativeUrl() != newer.GetNativeUrl() {
		t.Fatalf("the two requests name different files: %s, %s", old.GetNativeUrl(), newer.GetNativeUrl())
	}
	if code, body := h.putLikeSDK(newer, second, second); code != http.StatusOK {
		t.Fatalf("upload through the newer URL = %d %s", code, body)
	}
	before, err := os.Stat(newer.GetNativeUrl())
	if err != nil {
		t.Fatal(err)
	}

	code, body := h.putLikeSDK(old, first, first)
	if code != http.StatusConflict || !strings.Contains(body, "never replace") {
		t.Fatalf("PUT through the old URL = %d %q, want 409 saying uploads never replace a file", code, body)
	}
	if got, _ := os.ReadFile(newer.GetNativeUrl()); !bytes.Equal(got, second) {
		t.Fatalf("file after the refused PUT = %q, want %q", got, second)
	}

	// The same bytes again (a retried PUT) succeed and write nothing.
	if code, body := h.putLikeSDK(newer, second, second); code != http.StatusOK {
		t.Fatalf("retried PUT of the same content = %d %s, want 200", code, body)
	}
	after, err := os.Stat(newer.GetNativeUrl())
	if err != nil || !sameFile(t, before, after) {
		t.Fatalf("the retried PUT rewrote the file (%v)", err)
	}
}

func TestOldUnboundURLCannotReplaceAFileUploadedMeanwhile(t *testing.T) {
	h := newHarness(t)
	mine, theirs := []byte("mine"), []byte("theirs")
	// Issued without content_md5: the URL binds no content at all.
	old := h.createUpload(rootedUpload(mine, false))
	if strings.Contains(old.GetSignedUrl(), "md5=") {
		t.Fatalf("URL %s binds an MD5, want none", old.GetSignedUrl())
	}
	other := h.createUpload(rootedUpload(theirs, true))
	if code, body := h.putLikeSDK(other, theirs, theirs); code != http.StatusOK {
		t.Fatalf("upload through the other URL = %d %s", code, body)
	}
	before, err := os.Stat(other.GetNativeUrl())
	if err != nil {
		t.Fatal(err)
	}

	code, body := h.do(http.MethodPut, old.GetSignedUrl(), mine, nil)
	if code != http.StatusConflict || !strings.Contains(body, "after this URL was issued") {
		t.Fatalf("PUT through the old URL = %d %q, want 409", code, body)
	}
	withMD5 := map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(md5sum(mine))}
	if code, _ := h.do(http.MethodPut, old.GetSignedUrl(), mine, withMD5); code != http.StatusConflict {
		t.Fatalf("PUT through the old URL with its Content-MD5 = %d, want 409", code)
	}
	if got, _ := os.ReadFile(other.GetNativeUrl()); !bytes.Equal(got, theirs) {
		t.Fatalf("file after the refused PUTs = %q, want %q", got, theirs)
	}

	// The file's own bytes through the unbound URL: nothing changes, 200.
	if code, body := h.do(http.MethodPut, old.GetSignedUrl(), theirs, nil); code != http.StatusOK {
		t.Fatalf("PUT of identical content = %d %s, want 200", code, body)
	}
	after, err := os.Stat(other.GetNativeUrl())
	if err != nil || !sameFile(t, before, after) {
		t.Fatalf("the identical PUT rewrote the file (%v)", err)
	}
	// Issued now, with the file in place, the guard answers at once.
	_, err = h.dp.CreateUploadLocation(context.Background(), connect.NewRequest(rootedUpload(mine, false)))
	if codeOf(t, err) != connect.CodeAlreadyExists {
		t.Fatalf("CreateUploadLocation over an existing file without content_md5 = %v, want AlreadyExists", err)
	}
}
