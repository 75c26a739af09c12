package dataproxy_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"connectrpc.com/connect"

	dp "fmgr.dev/gen/go/flyteidl2/dataproxy"
)

// TestUploadNamesEndingInDot: a path segment ending in '.' would give a
// native_url that is not where the file store keeps the object, so the
// request is refused naming the field, before anything is signed or stored.
func TestUploadNamesEndingInDot(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name   string
		mutate func(r *dp.CreateUploadLocationRequest)
		field  string
	}{
		{"root segment x..", func(r *dp.CreateUploadLocationRequest) { r.FilenameRoot = "x../inputs" }, "filename_root"},
		{"root ends x.", func(r *dp.CreateUploadLocationRequest) { r.FilenameRoot = "runs/x." }, "filename_root"},
		{"filename x..", func(r *dp.CreateUploadLocationRequest) { r.Filename = "x.." }, "filename"},
		{"filename dot at end", func(r *dp.CreateUploadLocationRequest) { r.Filename = "report." }, "filename"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := uploadReq([]byte("content"), "file.txt")
			tc.mutate(req)
			_, err := h.dp.CreateUploadLocation(context.Background(), connect.NewRequest(req))
			if codeOf(t, err) != connect.CodeInvalidArgument {
				t.Fatalf("code = %v (%v), want InvalidArgument", connect.CodeOf(err), err)
			}
			if !strings.Contains(err.Error(), tc.field+" ") {
				t.Fatalf("message %q does not name %s", err.Error(), tc.field)
			}
		})
	}
	// Leading dots are ordinary names and keep working.
	req := uploadReq([]byte("content"), "..data")
	req.FilenameRoot = ".cache/..x"
	resp := h.createUpload(req)
	if code, body := h.putLikeSDK(resp, []byte("content"), []byte("content")); code != 200 {
		t.Fatalf("PUT = %d %s", code, body)
	}
	if got, err := os.ReadFile(resp.GetNativeUrl()); err != nil || string(got) != "content" {
		t.Fatalf("native_url %s holds %q, %v", resp.GetNativeUrl(), got, err)
	}
}
