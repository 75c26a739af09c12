package dataproxy_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base32"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/cluster"
	"fmgr.dev/gen/go/flyteidl2/cluster/clusterconnect"
	"fmgr.dev/gen/go/flyteidl2/common"
	dp "fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

func md5sum(b []byte) []byte {
	s := md5.Sum(b)
	return s[:]
}

// uploadReq is what the SDK sends for a code bundle from a localhost
// endpoint: empty org, raw MD5, 60 s lifetime, MD5 metadata requested.
func uploadReq(content []byte, filename string) *dp.CreateUploadLocationRequest {
	return &dp.CreateUploadLocationRequest{
		Project:               "flytesnacks",
		Domain:                "development",
		Org:                   "",
		Filename:              filename,
		ContentMd5:            md5sum(content),
		ExpiresIn:             durationpb.New(60 * time.Second),
		AddContentMd5Metadata: true,
	}
}

func (h *harness) createUpload(req *dp.CreateUploadLocationRequest) *dp.CreateUploadLocationResponse {
	h.t.Helper()
	resp, err := h.dp.CreateUploadLocation(context.Background(), connect.NewRequest(req))
	if err != nil {
		h.t.Fatalf("CreateUploadLocation: %v", err)
	}
	return resp.Msg
}

// putLikeSDK PUTs body the way flyte.remote._data does: the response's
// headers plus Content-Length and Content-MD5 (of content, which may differ
// from body to simulate corruption).
func (h *harness) putLikeSDK(resp *dp.CreateUploadLocationResponse, content, body []byte) (int, string) {
	hdr := map[string]string{}
	for k, v := range resp.GetHeaders() {
		hdr[k] = v
	}
	hdr["Content-MD5"] = base64.StdEncoding.EncodeToString(md5sum(content))
	return h.do(http.MethodPut, resp.GetSignedUrl(), body, hdr)
}

func codeOf(t *testing.T, err error) connect.Code {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error")
	}
	return connect.CodeOf(err)
}

func TestSelectClusterReturnsTheURLTheClientUsed(t *testing.T) {
	h := newHarness(t)
	port := strconv.Itoa(h.srv.Listener.Addr().(*net.TCPAddr).Port)

	resources := []*cluster.SelectClusterRequest{
		{},
		{Resource: &cluster.SelectClusterRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Domain: "development", Name: "flytesnacks"}}},
		{Resource: &cluster.SelectClusterRequest_ActionId{ActionId: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "d", Name: "r"}, Name: "a0"}}},
		{Resource: &cluster.SelectClusterRequest_OrgId{OrgId: &common.OrgIdentifier{}}},
		{Resource: &cluster.SelectClusterRequest_ActionAttemptId{ActionAttemptId: &common.ActionAttemptIdentifier{Attempt: 1}}},
	}
	ops := []cluster.SelectClusterRequest_Operation{
		cluster.SelectClusterRequest_OPERATION_UNSPECIFIED,
		cluster.SelectClusterRequest_OPERATION_CREATE_UPLOAD_LOCATION,
		cluster.SelectClusterRequest_OPERATION_UPLOAD_INPUTS,
		cluster.SelectClusterRequest_OPERATION_GET_ACTION_DATA,
		cluster.SelectClusterRequest_OPERATION_TAIL_LOGS,
		cluster.SelectClusterRequest_OPERATION_GET_CLUSTER_CONFIG,
		cluster.SelectClusterRequest_Operation(99), // from a newer SDK
	}
	// The same server reached under two names answers with the name used.
	for _, base := range []string{h.srv.URL, "http://localhost:" + port} {
		client := clusterconnect.NewClusterServiceClient(http.DefaultClient, base)
		for _, res := range resources {
			for _, op := range ops {
				res.Operation = op
				resp, err := client.SelectCluster(context.Background(), connect.NewRequest(res))
				if err != nil {
					t.Fatalf("SelectCluster(%v) via %s: %v", res, base, err)
				}
				if got := resp.Msg.GetClusterEndpoint(); got != base {
					t.Fatalf("cluster_endpoint = %q, want %q", got, base)
				}
			}
		}
	}
}

func TestCreateUploadLocationEmptyOrg(t *testing.T) {
	h := newHarness(t)
	content := []byte("a code bundle")
	resp := h.createUpload(uploadReq(content, "fastabc123.tar.gz"))

	dir := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(md5sum(content))
	key := "uploads/_/flytesnacks/development/" + dir + "/fastabc123.tar.gz"
	if want := filepath.Join(h.root, filepath.FromSlash(key)); resp.GetNativeUrl() != want {
		t.Fatalf("native_url = %q, want %q", resp.GetNativeUrl(), want)
	}
	if !strings.HasPrefix(resp.GetSignedUrl(), h.srv.URL+"/blobs/"+key+"?") {
		t.Fatalf("signed_url = %q", resp.GetSignedUrl())
	}
	if got := resp.GetHeaders()["Content-MD5"]; got != base64.StdEncoding.EncodeToString(md5sum(content)) {
		t.Fatalf("headers = %v", resp.GetHeaders())
	}
	if got, want := resp.GetExpiresAt().AsTime(), h.clock().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("expires_at = %v, want %v", got, want)
	}

	// Asking again for the same content names the same location.
	again := h.createUpload(uploadReq(content, "fastabc123.tar.gz"))
	if again.GetNativeUrl() != resp.GetNativeUrl() {
		t.Fatalf("second native_url %q differs", again.GetNativeUrl())
	}

	// An org, when sent, is part of the path; no MD5 metadata unless asked.
	req := uploadReq(content, "x.txt")
	req.Org, req.AddContentMd5Metadata = "acme", false
	withOrg := h.createUpload(req)
	if !strings.Contains(withOrg.GetNativeUrl(), filepath.FromSlash("uploads/acme/flytesnacks/development/")) || len(withOrg.GetHeaders()) != 0 {
		t.Fatalf("with org: %v", withOrg)
	}
}

func TestCreateUploadLocationExpiry(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		in   *durationpb.Duration
		want time.Duration
	}{
		{nil, time.Hour},
		{durationpb.New(0), time.Hour},
		{durationpb.New(90 * time.Second), 90 * time.Second},
		{durationpb.New(30 * 24 * time.Hour), 7 * 24 * time.Hour},
	} {
		req := uploadReq([]byte("x"), "f")
		req.ExpiresIn = tc.in
		resp := h.createUpload(req)
		if got := resp.GetExpiresAt().AsTime(); !got.Equal(h.clock().Add(tc.want)) {
			t.Errorf("expires_in %v: expires_at %v, want now+%v", tc.in, got, tc.want)
		}
	}
}

func TestCreateUploadLocationRejectsBadInput(t *testing.T) {
	h := newHarness(t, withMaxUpload(1000))
	for _, tc := range []struct {
		name   string
		mutate func(r *dp.CreateUploadLocationRequest)
		field  string
	}{
		{"no project", func(r *dp.CreateUploadLocationRequest) { r.Project = "" }, "project"},
		{"no domain", func(r *dp.CreateUploadLocationRequest) { r.Domain = "" }, "domain"},
		{"project with slash", func(r *dp.CreateUploadLocationRequest) { r.Project = "a/b" }, "project"},
		{"project dotdot", func(r *dp.CreateUploadLocationRequest) { r.Project = ".." }, "project"},
		{"org with slash", func(r *dp.CreateUploadLocationRequest) { r.Org = "x/../y" }, "org"},
		{"no filename", func(r *dp.CreateUploadLocationRequest) { r.Filename = "" }, "filename"},
		{"filename with slash", func(r *dp.CreateUploadLocationRequest) { r.Filename = "a/b.txt" }, "filename"},
		{"filename traversal", func(r *dp.CreateUploadLocationRequest) { r.Filename = "../../etc/passwd" }, "filename"},
		{"filename dotdot", func(r *dp.CreateUploadLocationRequest) { r.Filename = ".." }, "filename"},
		{"filename backslash", func(r *dp.CreateUploadLocationRequest) { r.Filename = `..\x` }, "filename"},
		{"filename NUL", func(r *dp.CreateUploadLocationRequest) { r.Filename = "a\x00b" }, "filename"},
		{"root traversal", func(r *dp.CreateUploadLocationRequest) { r.FilenameRoot = "../x" }, "filename_root"},
		{"root inner traversal", func(r *dp.CreateUploadLocationRequest) { r.FilenameRoot = "a/../../x" }, "filename_root"},
		{"root absolute", func(r *dp.CreateUploadLocationRequest) { r.FilenameRoot = "/etc" }, "filename_root"},
		{"md5 wrong size", func(r *dp.CreateUploadLocationRequest) { r.ContentMd5 = []byte("123456789") }, "content_md5"},
		{"neither md5 nor root", func(r *dp.CreateUploadLocationRequest) { r.ContentMd5 = nil }, "content_md5"},
		{"negative expiry", func(r *dp.CreateUploadLocationRequest) { r.ExpiresIn = durationpb.New(-time.Second) }, "expires_in"},
		{"too long", func(r *dp.CreateUploadLocationRequest) { r.ContentLength = 1001 }, "content_length"},
		{"negative length", func(r *dp.CreateUploadLocationRequest) { r.ContentLength = -1 }, "content_length"},
		{"path too long", func(r *dp.CreateUploadLocationRequest) {
			r.FilenameRoot = strings.Repeat("abcdefghi/", 100)[:999]
		}, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := uploadReq([]byte("content"), "file.txt")
			tc.mutate(req)
			_, err := h.dp.CreateUploadLocation(context.Background(), connect.NewRequest(req))
			if codeOf(t, err) != connect.CodeInvalidArgument {
				t.Fatalf("code = %v (%v), want InvalidArgument", connect.CodeOf(err), err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message %q does not name %q", err.Error(), tc.field)
			}
		})
	}
	// Nothing was created outside the store.
	if _, err := os.Stat(filepath.Join(filepath.Dir(h.root), "x")); !os.IsNotExist(err) {
		t.Fatal("a rejected request created a file outside the store")
	}
}

func TestSignedPutThenGet(t *testing.T) {
	h := newHarness(t)
	content := bytes.Repeat([]byte("flyte bundle bytes\n"), 5000)
	resp := h.createUpload(uploadReq(content, "fastdeadbeef.tar.gz"))

	code, body := h.putLikeSDK(resp, content, content)
	if code != http.StatusOK {
		t.Fatalf("PUT = %d %s", code, body)
	}
	onDisk, err := os.ReadFile(resp.GetNativeUrl())
	if err != nil || !bytes.Equal(onDisk, content) {
		t.Fatalf("native_url content: %d bytes, %v", len(onDisk), err)
	}

	// Uploading the same content again (a retry) is fine.
	if code, body := h.putLikeSDK(resp, content, content); code != http.StatusOK {
		t.Fatalf("second PUT = %d %s", code, body)
	}

	key, err := h.store.Key(resp.GetNativeUrl())
	if err != nil {
		t.Fatal(err)
	}
	get := h.signer.Sign(h.srv.URL, http.MethodGet, key, h.clock().Add(time.Minute), nil)
	res, err := http.Get(get)
	if err != nil {
		t.Fatal(err)
	}
	got := new(bytes.Buffer)
	_, _ = got.ReadFrom(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Equal(got.Bytes(), content) {
		t.Fatalf("GET = %d, %d bytes", res.StatusCode, got.Len())
	}
	if res.ContentLength != int64(len(content)) || res.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("GET headers: length %d, type %q", res.ContentLength, res.Header.Get("Content-Type"))
	}

	// HEAD on a GET URL; a range.
	if code, _ := h.do(http.MethodHead, get, nil, nil); code != http.StatusOK {
		t.Fatalf("HEAD = %d", code)
	}
	if code, body := h.do(http.MethodGet, get, nil, map[string]string{"Range": "bytes=0-4"}); code != http.StatusPartialContent || body != "flyte" {
		t.Fatalf("Range GET = %d %q", code, body)
	}

	// A GET URL for a missing object.
	missing := h.signer.Sign(h.srv.URL, http.MethodGet, "uploads/none", h.clock().Add(time.Minute), nil)
	if code, _ := h.do(http.MethodGet, missing, nil, nil); code != http.StatusNotFound {
		t.Fatalf("missing GET = %d", code)
	}
}

func TestSignedPutRejections(t *testing.T) {
	h := newHarness(t, withMaxUpload(4096))
	content := []byte("the real content")
	resp := h.createUpload(uploadReq(content, "data.bin"))
	stored := func() bool {
		_, err := os.Stat(resp.GetNativeUrl())
		return err == nil
	}
	good := map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(md5sum(content))}
	u, _ := url.Parse(resp.GetSignedUrl())

	withQuery := func(mut func(q url.Values)) string {
		c := *u
		q := c.Query()
		mut(q)
		c.RawQuery = q.Encode()
		return c.String()
	}
	flip := func(s string) string {
		b := []byte(s)
		if b[3] == 'A' {
			b[3] = 'B'
		} else {
			b[3] = 'A'
		}
		return string(b)
	}

	for _, tc := range []struct {
		name   string
		method string
		url    string
		body   []byte
		hdr    map[string]string
		code   int
		msg    string
	}{
		{"tampered signature", "PUT", withQuery(func(q url.Values) { q.Set("sig", flip(q.Get("sig"))) }), content, good, 403, "signature invalid"},
		{"no signature", "PUT", withQuery(func(q url.Values) { q.Del("sig") }), content, good, 403, "signature invalid"},
		{"longer expiry", "PUT", withQuery(func(q url.Values) { q.Set("exp", "99999999999") }), content, good, 403, "signature invalid"},
		{"md5 removed from URL", "PUT", withQuery(func(q url.Values) { q.Del("md5") }), content, good, 403, "signature invalid"},
		{"other key", "PUT", strings.Replace(resp.GetSignedUrl(), "data.bin", "data2.bin", 1), content, good, 403, "signature invalid"},
		{"GET with a PUT URL", "GET", resp.GetSignedUrl(), nil, nil, 403, "not valid for GET"},
		{"POST", "POST", resp.GetSignedUrl(), content, good, 405, "method not allowed"},
		{"DELETE", "DELETE", resp.GetSignedUrl(), nil, nil, 405, "method not allowed"},
		{"no Content-MD5", "PUT", resp.GetSignedUrl(), content, nil, 400, "requires a Content-MD5"},
		{"wrong Content-MD5", "PUT", resp.GetSignedUrl(), []byte("other"), map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(md5sum([]byte("other")))}, 400, "does not match"},
		{"garbage Content-MD5", "PUT", resp.GetSignedUrl(), content, map[string]string{"Content-MD5": "not-base64!"}, 400, "Content-MD5"},
		{"body not matching signed MD5", "PUT", resp.GetSignedUrl(), []byte("corrupted content"), good, 400, "BadDigest"},
		{"body too large", "PUT", resp.GetSignedUrl(), make([]byte, 5000), good, 413, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := h.do(tc.method, tc.url, tc.body, tc.hdr)
			if code != tc.code || !strings.Contains(body, tc.msg) {
				t.Fatalf("%s = %d %q, want %d containing %q", tc.method, code, body, tc.code, tc.msg)
			}
			if stored() {
				t.Fatal("a rejected PUT stored the object")
			}
		})
	}

	// A chunked body over the limit (no Content-Length up front).
	big := h.signer.Sign(h.srv.URL, http.MethodPut, "uploads/chunked", h.clock().Add(time.Minute), nil)
	req, _ := http.NewRequest(http.MethodPut, big, struct{ *bytes.Reader }{bytes.NewReader(make([]byte, 10000))})
	req.ContentLength = -1
	res, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked oversize PUT = %d", res.StatusCode)
	}
	if ok, _ := h.store.Exists(context.Background(), "uploads/chunked"); ok {
		t.Fatal("oversize chunked PUT stored the object")
	}

	// Expired: the same URL after its lifetime.
	h.advance(61 * time.Second)
	if code, body := h.putLikeSDK(resp, content, content); code != 403 || !strings.Contains(body, "URL expired") {
		t.Fatalf("expired PUT = %d %q", code, body)
	}
	if stored() {
		t.Fatal("an expired PUT stored the object")
	}
}

func TestSignedPutCorruptBodyKeepsPreviousObject(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	key := "uploads/_/p/d/root/file.txt"
	old := []byte("version one")
	if err := h.store.Put(ctx, key, old, nil); err != nil {
		t.Fatal(err)
	}
	put := h.signer.Sign(h.srv.URL, http.MethodPut, key, h.clock().Add(time.Minute), md5sum(old))
	code, body := h.do(http.MethodPut, put, []byte("version two"), map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(md5sum(old))})
	if code != http.StatusBadRequest {
		t.Fatalf("PUT = %d %s", code, body)
	}
	if got, _ := h.store.Get(ctx, key); !bytes.Equal(got, old) {
		t.Fatalf("object is now %q", got)
	}
	// An unsigned-MD5 URL still honours a Content-MD5 the client sends.
	put = h.signer.Sign(h.srv.URL, http.MethodPut, key, h.clock().Add(time.Minute), nil)
	code, _ = h.do(http.MethodPut, put, []byte("version two"), map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(md5sum(old))})
	if code != http.StatusBadRequest {
		t.Fatalf("PUT with mismatching Content-MD5 = %d", code)
	}
	// A matching body still never replaces the object (upload URLs only create).
	code, _ = h.do(http.MethodPut, put, []byte("version two"), map[string]string{"Content-Type": "text/plain"})
	if got, _ := h.store.Get(ctx, key); code != http.StatusConflict || !bytes.Equal(got, old) {
		t.Fatalf("PUT = %d, object %q", code, got)
	}
}

func TestBlobEndpointRejectsTraversal(t *testing.T) {
	h := newHarness(t)
	var blobs http.Handler
	for _, r := range h.svc.Handlers() {
		if r.Path == blob.SignedPath {
			blobs = r.Handler
		}
	}
	outside := filepath.Join(filepath.Dir(h.root), "evil")
	for _, key := range []string{"../evil", "a/../../evil", "uploads/../../evil", `..\evil`, "/evil", "a//b", "a/./b", "x.attrs"} {
		// Even a correctly signed URL for a bad key is refused (we never
		// sign one, but the endpoint does not rely on that).
		signed := h.signer.Sign("http://h", http.MethodPut, key, h.clock().Add(time.Minute), nil)
		u, _ := url.Parse(signed)
		req := httptest.NewRequest(http.MethodPut, "http://h/", strings.NewReader("evil"))
		req.URL.Path = blob.SignedPath + key
		req.URL.RawQuery = u.RawQuery
		rec := httptest.NewRecorder()
		blobs.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("PUT key %q = %d %s, want 400", key, rec.Code, rec.Body)
		}
	}
	// Through the real server, escaped traversal never lands outside either.
	for _, p := range []string{"/blobs/..%2Fevil", "/blobs/a/%2e%2e/%2e%2e/evil", "/blobs/%2e%2e/evil", "/blobs/..%5Cevil"} {
		signed := h.signer.Sign(h.srv.URL, http.MethodPut, "x", h.clock().Add(time.Minute), nil)
		u, _ := url.Parse(signed)
		code, _ := h.do(http.MethodPut, h.srv.URL+p+"?"+u.RawQuery, []byte("evil"), nil)
		if code == http.StatusOK {
			t.Errorf("PUT %s succeeded", p)
		}
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatal("traversal wrote outside the store")
	}
}

func TestUploadOverwriteGuard(t *testing.T) {
	h := newHarness(t)
	content := []byte("first")
	req := uploadReq(content, "inputs.pb")
	req.FilenameRoot = "tracked-runs/r1/a0"
	resp := h.createUpload(req)
	if !strings.HasSuffix(resp.GetNativeUrl(), filepath.FromSlash("uploads/_/flytesnacks/development/tracked-runs/r1/a0/inputs.pb")) {
		t.Fatalf("native_url = %s", resp.GetNativeUrl())
	}
	if code, body := h.putLikeSDK(resp, content, content); code != 200 {
		t.Fatalf("PUT = %d %s", code, body)
	}
	// Same content again: fine.
	h.createUpload(req)
	// Different content, or no MD5: refused.
	other := uploadReq([]byte("second"), "inputs.pb")
	other.FilenameRoot = req.FilenameRoot
	_, err := h.dp.CreateUploadLocation(context.Background(), connect.NewRequest(other))
	if codeOf(t, err) != connect.CodeAlreadyExists {
		t.Fatalf("different content: %v", err)
	}
	other.ContentMd5 = nil
	_, err = h.dp.CreateUploadLocation(context.Background(), connect.NewRequest(other))
	if codeOf(t, err) != connect.CodeAlreadyExists {
		t.Fatalf("no md5: %v", err)
	}
}

func TestRunDataCallsWithoutRunsAreUnimplemented(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	aid := &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "d", Name: "r"}, Name: "a0"}
	check := func(name string, err error) {
		t.Helper()
		if codeOf(t, err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "not available yet") {
			t.Errorf("%s: %v, want Unimplemented 'not available yet'", name, err)
		}
	}
	_, err := h.dp.UploadInputs(ctx, connect.NewRequest(&dp.UploadInputsRequest{
		Id:   &dp.UploadInputsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "p", Domain: "d"}},
		Task: &dp.UploadInputsRequest_TaskId{TaskId: &task.TaskIdentifier{Name: "t"}},
	}))
	check("UploadInputs", err)
	_, err = h.dp.GetActionData(ctx, connect.NewRequest(&dp.GetActionDataRequest{ActionId: aid}))
	check("GetActionData", err)
	_, err = h.dp.CreateDownloadLink(ctx, connect.NewRequest(&dp.CreateDownloadLinkRequest{
		ArtifactType: dp.ArtifactType_ARTIFACT_TYPE_REPORT,
		Source:       &dp.CreateDownloadLinkRequest_ActionAttemptId{ActionAttemptId: &common.ActionAttemptIdentifier{ActionId: aid, Attempt: 1}},
	}))
	check("CreateDownloadLink", err)
	stream, err := h.dp.TailLogs(ctx, connect.NewRequest(&dp.TailLogsRequest{ActionId: aid, Attempt: 1}))
	if err == nil {
		for stream.Receive() {
		}
		err = stream.Err()
	}
	check("TailLogs", err)
}

// reportRuns is a RunData that knows one report location and one code
// bundle; the other calls are the run service's business.
type reportRuns struct {
	dataproxy.RunData
	uri, bundle string
}

func (r reportRuns) CodeBundleURI(context.Context, *common.ActionAttemptIdentifier, *task.TaskIdentifier) (string, error) {
	return r.bundle, nil
}

func (r reportRuns) ReportURI(context.Context, *common.ActionAttemptIdentifier) (string, error) {
	if r.uri == "" {
		return "", errs.NotFoundf("no such attempt")
	}
	return r.uri, nil
}

func TestCreateDownloadLinkForReport(t *testing.T) {
	runs := &reportRuns{}
	h := newHarness(t, withRuns(runs))
	ctx := context.Background()
	key := "runs/p/d/r/a0/1/report.html"
	runs.uri = h.store.URI(key)
	req := &dp.CreateDownloadLinkRequest{
		ArtifactType: dp.ArtifactType_ARTIFACT_TYPE_REPORT,
		Source: &dp.CreateDownloadLinkRequest_ActionAttemptId{ActionAttemptId: &common.ActionAttemptIdentifier{
			ActionId: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "d", Name: "r"}, Name: "a0"}, Attempt: 1}},
	}
	_, err := h.dp.CreateDownloadLink(ctx, connect.NewRequest(req))
	if codeOf(t, err) != connect.CodeNotFound {
		t.Fatalf("no report yet: %v", err)
	}
	if err := h.store.Put(ctx, key, []byte("<html>report</html>"), nil); err != nil {
		t.Fatal(err)
	}
	resp, err := h.dp.CreateDownloadLink(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	urls := resp.Msg.GetPreSignedUrls().GetSignedUrl()
	if len(urls) != 1 {
		t.Fatalf("urls = %v", urls)
	}
	res, err := http.Get(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	buf := new(bytes.Buffer)
	_, _ = buf.ReadFrom(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || buf.String() != "<html>report</html>" || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET report = %d %q %q", res.StatusCode, buf.String(), res.Header.Get("Content-Type"))
	}
	if res.Header.Get("Content-Security-Policy") == "" {
		t.Fatal("HTML served without a sandboxing CSP")
	}
	// A PUT with the download URL is refused.
	if code, _ := h.do(http.MethodPut, urls[0], []byte("x"), nil); code != http.StatusForbidden {
		t.Fatalf("PUT with a GET URL = %d", code)
	}

	// Run state pointing outside the store is an internal error, not a leak.
	runs.uri = "/etc/passwd"
	_, err = h.dp.CreateDownloadLink(ctx, connect.NewRequest(req))
	if codeOf(t, err) != connect.CodeInternal || strings.Contains(err.Error(), "passwd") {
		t.Fatalf("outside URI: %v", err)
	}

	// The code bundle the attempt ran, by attempt and by deployed task.
	bundleKey := "uploads/_/p/d/abc/fast123.tar.gz"
	runs.bundle = h.store.URI(bundleKey)
	if err := h.store.Put(ctx, bundleKey, []byte("tgz bytes"), nil); err != nil {
		t.Fatal(err)
	}
	req.ArtifactType = dp.ArtifactType_ARTIFACT_TYPE_CODE_BUNDLE
	byTask := proto.Clone(req).(*dp.CreateDownloadLinkRequest)
	byTask.Source = &dp.CreateDownloadLinkRequest_TaskId{TaskId: &task.TaskIdentifier{Project: "p", Domain: "d", Name: "env.t", Version: "v1"}}
	for _, req := range []*dp.CreateDownloadLinkRequest{req, byTask} {
		resp, err := h.dp.CreateDownloadLink(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("code bundle: %v", err)
		}
		code, body := h.do(http.MethodGet, resp.Msg.GetPreSignedUrls().GetSignedUrl()[0], nil, nil)
		if code != http.StatusOK || body != "tgz bytes" {
			t.Fatalf("GET code bundle = %d %q", code, body)
		}
	}

	// Unsupported artifact kinds.
	req.ArtifactType = dp.ArtifactType_ARTIFACT_TYPE_UNSPECIFIED
	_, err = h.dp.CreateDownloadLink(ctx, connect.NewRequest(req))
	if codeOf(t, err) != connect.CodeInvalidArgument {
		t.Fatalf("unspecified artifact: %v", err)
	}
}

func TestGzipRequestBodies(t *testing.T) {
	// connect-go's own gzip support, with and without the decompressing
	// middleware in front.
	for _, opt := range []harnessOpt{withoutGunzip(), func(*dataproxy.Deps, *harnessCfg) {}} {
		h := newHarness(t, opt)
		client := dataproxyconnect.NewDataProxyServiceClient(h.srv.Client(), h.srv.URL, connect.WithSendGzip())
		resp, err := client.CreateUploadLocation(context.Background(), connect.NewRequest(uploadReq([]byte("z"), "z.txt")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetSignedUrl() == "" {
			t.Fatal("empty signed_url")
		}
		var sawGzip bool
		for _, r := range h.requests() {
			sawGzip = sawGzip || r.ContentEncoding == "gzip"
		}
		if !sawGzip {
			t.Fatal("the client did not gzip its request")
		}
	}
}
