package dataproxy_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/sdktest"
)

// sdkUploadScript drives the SDK's own upload path (flyte.remote.upload_file
// and upload_dir: SelectCluster → CreateUploadLocation → httpx PUT to the
// signed URL) and prints what the SDK got back.
const sdkUploadScript = `
import json, pathlib, sys

import flyte
import flyte.remote as remote

endpoint, work = sys.argv[1], pathlib.Path(sys.argv[2])
flyte.init(endpoint=endpoint, insecure=True, project="flytesnacks", domain="development")

out = {}
md5, native = remote.upload_file(work / "payload.bin")
out["file"] = {"md5": md5, "native_url": native}
md5, native = remote.upload_file(work / "payload.bin")
out["again"] = {"md5": md5, "native_url": native}
out["dir"] = remote.upload_dir(work / "dir")
print("RESULT " + json.dumps(out))
`

// sdkPython is the interpreter of the flyte SDK virtualenv (sdktest.Venv).
func sdkPython(t *testing.T) string { return sdktest.Python(t) }

type sdkUpload struct {
	MD5       string `json:"md5"`
	NativeURL string `json:"native_url"`
}

// TestRealSDKUpload runs the SDK's upload path against the real handlers,
// once behind the gzip-decompressing middleware the manager's server uses
// and once with connect-go decoding the gzip bodies itself. (With
// connect-go v1.21.1 and connectrpc 0.10.1/pyqwest both work: the client
// gzips every unary body, empty messages included, and connect-go decodes
// them.)
func TestRealSDKUpload(t *testing.T) {
	py := sdkPython(t)
	t.Run("gunzip-middleware", func(t *testing.T) { testSDKUpload(t, py) })
	t.Run("connect-go-gzip", func(t *testing.T) { testSDKUpload(t, py, withoutGunzip()) })
}

func testSDKUpload(t *testing.T, py string, opts ...harnessOpt) {
	h := newHarness(t, opts...)

	work := t.TempDir()
	payload := make([]byte, 300<<10)
	_, _ = rand.Read(payload)
	if err := os.WriteFile(filepath.Join(work, "payload.bin"), payload, 0o644); err != nil {
		t.Fatal(err)
	}
	dirFiles := map[string]string{"a.txt": "alpha\n", "b.csv": "x,y\n1,2\n"}
	if err := os.MkdirAll(filepath.Join(work, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range dirFiles {
		if err := os.WriteFile(filepath.Join(work, "dir", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(work, "upload.py")
	if err := os.WriteFile(script, []byte(sdkUploadScript), 0o644); err != nil {
		t.Fatal(err)
	}

	// localhost:<port>, as a user types it; the SDK turns it into
	// http://localhost:<port> because insecure=True.
	endpoint := "localhost:" + strconv.Itoa(h.srv.Listener.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script, endpoint, work)
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + work,
		"DO_NOT_TRACK=1",
		"FLYTE_DISABLE_TELEMETRY=true",
		"PYTHONUNBUFFERED=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	for _, r := range h.requests() {
		t.Logf("SDK sent: %s %s content-type=%q content-encoding=%q", r.Method, r.Path, r.ContentType, r.ContentEncoding)
	}
	if err != nil {
		t.Fatalf("SDK script failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	var out struct {
		File, Again sdkUpload
		Dir         string
	}
	var line string
	for l := range strings.Lines(stdout.String()) {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			line = rest
		}
	}
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		t.Fatalf("no result from the SDK (%v)\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	// The Go side sees the file's bytes at the native_url the SDK got.
	sum := md5.Sum(payload)
	if out.File.MD5 != hex.EncodeToString(sum[:]) {
		t.Fatalf("SDK md5 %s, want %x", out.File.MD5, sum)
	}
	got, err := os.ReadFile(out.File.NativeURL)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("native_url %s: %d bytes, %v", out.File.NativeURL, len(got), err)
	}
	key, err := h.store.Key(out.File.NativeURL)
	if err != nil || !strings.HasPrefix(key, "uploads/_/flytesnacks/development/") || !strings.HasSuffix(key, "/payload.bin") {
		t.Fatalf("native_url maps to key %q, %v", key, err)
	}
	if stored, err := h.store.Get(context.Background(), key); err != nil || !bytes.Equal(stored, payload) {
		t.Fatalf("store.Get(%q): %d bytes, %v", key, len(stored), err)
	}
	if out.Again != out.File {
		t.Fatalf("second upload of the same file: %+v, first %+v", out.Again, out.File)
	}

	// upload_dir: one filename_root for all files, and the SDK derives the
	// directory URI from the native_url it got.
	for name, body := range dirFiles {
		b, err := os.ReadFile(filepath.Join(out.Dir, name))
		if err != nil || string(b) != body {
			t.Fatalf("%s in uploaded dir %s: %q, %v", name, out.Dir, b, err)
		}
	}
	if _, err := h.store.Key(filepath.Join(out.Dir, "a.txt")); err != nil {
		t.Fatalf("uploaded dir %s is not in the store: %v", out.Dir, err)
	}
}
