package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"fmgr.dev/executor/testcluster"
	"fmgr.dev/internal/sdktest"
	"fmgr.dev/internal/testkit"
)

// TestSandbox runs the built sandbox image (FM_SANDBOX_IMAGE, the OCI layout
// `make sandbox-image` writes; `make test-sandbox` builds it and runs this)
// with runc the way the SDK's `flyte start devbox` runs it with docker:
// env K3S_KUBECONFIG_OUTPUT and FLYTE_DEV, bind mounts for /.kube,
// /var/lib/flyte/config and /var/lib/flyte/storage, the host's network for
// the published ports. The SDK quick start runs against it from the host,
// and kubectl with the kubeconfig it wrote shows the run; after a restart on
// the same storage the run is still there; and it also starts with no
// volumes at all. Opt-in (FM_SANDBOX_TEST=1), as root, with runc.
func TestSandbox(t *testing.T) {
	if os.Getenv("FM_SANDBOX_TEST") == "" {
		t.Skip("opt-in: make test-sandbox (FM_SANDBOX_TEST=1 FM_SANDBOX_IMAGE=dist/sandbox/oci)")
	}
	if os.Getuid() != 0 {
		t.Skip("runs the image with runc as root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("no runc (apt-get install runc)")
	}
	python := sdktest.Python(t)
	kubectl := filepath.Join(testcluster.RequireAssets(t), "kubectl")
	rootfs := unpack(t, os.Getenv("FM_SANDBOX_IMAGE"))

	host := t.TempDir()
	kube, conf, storage := filepath.Join(host, "kube"), filepath.Join(host, "config"), filepath.Join(host, "storage")
	for _, d := range []string{kube, conf, storage} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	contract := sdkContract(t, python, kube, conf, storage)
	kubeconfig := filepath.Join(kube, "kubeconfig")

	c := start(t, rootfs, contract)
	waitHealthy(t, c)
	testkit.Eventually(t, "the kubeconfig", 30*time.Second, func() bool {
		fi, err := os.Stat(kubeconfig)
		return err == nil && fi.Size() > 0
	})

	// The quick start, from the host's venv against the published port.
	work := t.TempDir()
	copyExamples(t, work)
	sdk(t, filepath.Join(filepath.Dir(python), "flyte"), work, "create", "config", "--devbox")
	out := sdk(t, python, work, "examples/hello.py")
	m := regexp.MustCompile(`(?m)^run (\S+):`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "Hello, World!") {
		t.Fatalf("python examples/hello.py: want a run that returned Hello, World!:\n%s", out)
	}
	run := m[1]
	// The quick start works because auth is off (the devbox config is
	// plain http, which carries no credentials); the sandbox says so at
	// start and in /readyz, which stays ready.
	if resp, err := http.Get("http://localhost:30080/readyz"); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "auth: ok (auth.mode off while listening beyond loopback on 0.0.0.0:30080") {
			t.Errorf("/readyz = %s %s, want ready with the auth detail", resp.Status, b)
		}
	}
	if !strings.Contains(c.output.String(), "WARNING: AUTHENTICATION IS OFF") {
		t.Errorf("the sandbox did not warn that auth is off:\n%s", c.output.String())
	}
	wantRun := func() {
		t.Helper()
		cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "get", "taskactions", "-o", "wide")
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), run) {
			t.Fatalf("kubectl get taskactions -o wide: %v, want run %s:\n%s", err, run, b)
		}
	}
	wantRun()

	// The S3 endpoint on 30002 with the key of the SDK's S3.for_sandbox():
	// an object put from the host is a file in the storage volume.
	out = sdk(t, python, work, "-c", sandboxS3Script)
	if !strings.Contains(out, "read back: hi sandbox") {
		t.Fatalf("the S3 endpoint on 30002:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(storage, "blobs", "tests", "hello.txt")); err != nil || string(b) != "hi sandbox" {
		t.Fatalf("the object put through port 30002 is not in the storage: %q, %v", b, err)
	}

	// Stop, start again on the same storage: the run is still there (and
	// the rewritten kubeconfig works).
	c.stop(t)
	if err := os.Remove(kubeconfig); err != nil {
		t.Fatal(err)
	}
	c = start(t, rootfs, contract)
	waitHealthy(t, c)
	testkit.Eventually(t, "the kubeconfig after a restart", 30*time.Second, func() bool {
		fi, err := os.Stat(kubeconfig)
		return err == nil && fi.Size() > 0
	})
	wantRun()
	c.stop(t)

	// docker run -p 30080:30080 IMAGE: no env, no volumes.
	c = start(t, rootfs, runSpec{})
	waitHealthy(t, c)
	resp, err := http.Get("http://localhost:30080/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ with no volumes: %s", resp.Status)
	}
	c.stop(t)
}

// sdkContract is what the pinned SDK's `flyte start devbox` passes to
// `docker run` (flyte/cli/_devbox.py's _run_container, run with a docker
// that records its arguments): its env and its volumes, the named storage
// volume standing for storage. The test fails if the SDK passes anything
// this harness does not know how to give.
func sdkContract(t *testing.T, python, kube, conf, storage string) runSpec {
	t.Helper()
	dir := t.TempDir()
	argv := filepath.Join(dir, "argv")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argv + "\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	const volume = "flyte-devbox-test-volume"
	code := "import sys\nfrom pathlib import Path\nfrom flyte.cli._devbox import _run_container\n" +
		"_run_container('img', False, 'flyte-devbox', Path(sys.argv[1]), Path(sys.argv[2]), '" + volume + "', ['6443:6443', '30080:30080'])\n"
	cmd := exec.Command(python, "-c", code, kube, conf)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the SDK's _run_container: %v\n%s", err, b)
	}
	b, err := os.ReadFile(argv)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	spec := runSpec{mounts: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "run", "--detach", "--rm", "--privileged", "img":
			continue
		case "--name", "--add-host", "--publish":
			i++ // the host's network: every port is published, host.docker.internal unused
			continue
		case "--env":
			i++
			spec.env = append(spec.env, args[i])
			continue
		case "--volume":
			i++
			j := strings.LastIndex(args[i], ":")
			src, dst := args[i][:j], args[i][j+1:]
			if src == volume {
				src = storage
			}
			spec.mounts[dst] = src
			continue
		}
		t.Fatalf("the SDK's docker run passes %q, which this test does not give: %q", a, args)
	}
	for dst, src := range map[string]string{"/.kube": kube, "/var/lib/flyte/config": conf, "/var/lib/flyte/storage": storage} {
		if got, _ := filepath.Abs(spec.mounts[dst]); got != src {
			t.Fatalf("the SDK mounts %q at %s, want %s: %q", spec.mounts[dst], dst, src, args)
		}
	}
	return spec
}

// unpack flattens the layout's image into a root filesystem.
func unpack(t *testing.T, dir string) string {
	t.Helper()
	if dir == "" {
		t.Fatal("FM_SANDBOX_IMAGE names no OCI layout (make sandbox-image writes dist/sandbox/oci)")
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) == 0 {
		t.Fatalf("index: %v", err)
	}
	// index.json → the image index → the one platform's image.
	inner, err := idx.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := inner.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("the image index: %v", err)
	}
	img, err := inner.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tar := exec.Command("tar", "-x", "--numeric-owner", "-C", rootfs)
	tar.Stdin = rc
	if b, err := tar.CombinedOutput(); err != nil {
		t.Fatalf("unpacking the image: %v\n%s", err, b)
	}
	b, err := json.Marshal(cf.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "image-config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return rootfs
}

func copyExamples(t *testing.T, dst string) {
	t.Helper()
	src := filepath.Join(sdktest.RepoRoot(), "examples")
	if err := os.CopyFS(filepath.Join(dst, "examples"), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// sdk runs one of the host venv's executables (python, flyte) in dir, with
// the venv's bin first on PATH.
func sdk(t *testing.T, exe, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(exe)+":"+os.Getenv("PATH"), "HOME="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(exe), strings.Join(args, " "), err, out.String())
		}
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%s %s: no end after 5 minutes\n%s", filepath.Base(exe), strings.Join(args, " "), out.String())
	}
	return out.String()
}

func waitHealthy(t *testing.T, c *container) {
	t.Helper()
	if msg := testkit.Poll(2*time.Minute, 200*time.Millisecond, func() string {
		if c.exited() {
			return "the container exited"
		}
		resp, err := http.Get("http://localhost:30080/healthz")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%s: %s", resp.Status, b)
		}
		return ""
	}); msg != "" {
		t.Fatalf("/healthz: %s\n%s", msg, c.output.String())
	}
}

// sandboxS3Script puts, checks and gets an object through the sandbox's
// S3 endpoint with the SDK's storage layer, configured as S3.for_sandbox()
// on port 30002.
const sandboxS3Script = `
import asyncio, dataclasses, pathlib, tempfile
import flyte, flyte.storage as fs
from flyte.storage import S3

async def main():
    flyte.init(storage=dataclasses.replace(S3.for_sandbox(), endpoint="http://localhost:30002"))
    d = pathlib.Path(tempfile.mkdtemp())
    (d / "hello.txt").write_text("hi sandbox")
    await fs.put(str(d / "hello.txt"), "s3://flyte/tests/hello.txt")
    assert await fs.exists("s3://flyte/tests/hello.txt")
    back = await fs.get("s3://flyte/tests/hello.txt", str(d / "back.txt"))
    print("read back:", pathlib.Path(back).read_text())

asyncio.run(main())
`
