package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"fmgr.dev/internal/testkit"
)

// TestImage builds the image twice and gets one digest, validates the layout
// as OCI (media types, digests, sizes, platforms), unpacks the amd64 root
// filesystem and runs its entrypoint in it, chrooted as the image's user,
// until /healthz answers. It builds linux/amd64 only; FM_IMAGE_FULL=1 builds
// both platforms (as `make image` does) and checks the arm64 binary too.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager twice")
	}
	platforms := []string{"linux/amd64"}
	if os.Getenv("FM_IMAGE_FULL") != "" {
		platforms = append(platforms, "linux/arm64")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	o := options{root: root, platforms: platforms, version: "v0.0.0-test", revision: "0123abc",
		source: "https://example.com/flyte-manager", epoch: time.Unix(1700000000, 0).UTC(),
		caFile: "/etc/ssl/certs/ca-certificates.crt", goCmd: "go", dockerTars: true}
	if _, err := os.Stat(o.caFile); err != nil {
		t.Skipf("no CA bundle on this host: %v", err)
	}
	ctx := context.Background()
	builds := make([]result, 2)
	for i := range builds {
		o.out = filepath.Join(t.TempDir(), "image")
		if builds[i], err = build(ctx, o, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	if builds[0].digest != builds[1].digest {
		t.Fatalf("two builds of one tree differ: %s and %s", builds[0].digest, builds[1].digest)
	}
	for _, name := range []string{"flyte-manager.oci.tar", "flyte-manager-linux-amd64.docker.tar"} {
		a, b := fileSum(t, filepath.Join(filepath.Dir(builds[0].layout), name)), fileSum(t, filepath.Join(filepath.Dir(builds[1].layout), name))
		if a != b {
			t.Errorf("%s differs between two builds", name)
		}
	}

	idx := checkLayout(t, builds[0], platforms)
	var amd64 v1.Image
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if d.Platform.Architecture == "amd64" {
			amd64 = img
		}
		checkBinary(t, img, d.Platform.Architecture)
	}
	if amd64 == nil {
		t.Fatal("no linux/amd64 image in the index")
	}
	// The docker-archive holds the same image (its config, which names
	// every layer by content; the archive has no manifest of its own).
	fromTar, err := tarball.ImageFromPath(filepath.Join(filepath.Dir(builds[0].layout), "flyte-manager-linux-amd64.docker.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := configName(t, fromTar), configName(t, amd64); a != b {
		t.Errorf("docker tarball's image has config %s, the layout's %s", a, b)
	}
	runEntrypoint(t, amd64)
}

// checkLayout reads the layout back and validates it: index.json names the
// multi-platform index under both tags, every blob matches its digest and
// size, and every media type is OCI's.
func checkLayout(t *testing.T, r result, platforms []string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(r.layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 2 {
		t.Fatalf("index.json has %d entries, want 2 (the version and latest)", len(tm.Manifests))
	}
	var tags []string
	for _, d := range tm.Manifests {
		if d.MediaType != types.OCIImageIndex || d.Digest != r.digest {
			t.Errorf("index.json entry %s %s, want %s %s", d.MediaType, d.Digest, types.OCIImageIndex, r.digest)
		}
		tags = append(tags, d.Annotations["io.containerd.image.name"])
	}
	if strings.Join(tags, " ") != "index.docker.io/library/flyte-manager:v0.0.0-test index.docker.io/library/flyte-manager:latest" {
		t.Errorf("image names %q", tags)
	}
	idx, err := top.ImageIndex(r.digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the index does not validate: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || len(m.Manifests) != len(platforms) {
		t.Fatalf("index %s with %d manifests, want %s with %d", m.MediaType, len(m.Manifests), types.OCIImageIndex, len(platforms))
	}
	for i, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil || d.Platform.String() != platforms[i] {
			t.Errorf("manifest %d: %s for %v, want an OCI manifest for %s", i, d.MediaType, d.Platform, platforms[i])
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		im, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if im.Config.MediaType != types.OCIConfigJSON {
			t.Errorf("config media type %s", im.Config.MediaType)
		}
		for _, l := range im.Layers {
			if l.MediaType != types.OCILayer {
				t.Errorf("layer media type %s", l.MediaType)
			}
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != binaryPath || strings.Join(c.Cmd, " ") != "start" {
			t.Errorf("user %q, entrypoint %q, cmd %q", c.User, c.Entrypoint, c.Cmd)
		}
		for k, want := range map[string]string{"org.opencontainers.image.version": "v0.0.0-test",
			"org.opencontainers.image.revision": "0123abc", "org.opencontainers.image.source": "https://example.com/flyte-manager"} {
			if c.Labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
			}
		}
	}
	return idx
}

// checkBinary finds the manager in the image's files: a static ELF for
// the image's architecture.
func checkBinary(t *testing.T, img v1.Image, arch string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no %s in the image: %v", arch, binaryPath, err)
		}
		if "/"+h.Name != binaryPath {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
		if f.Machine != want {
			t.Errorf("%s image's binary is for %s", arch, f.Machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s image's binary is dynamically linked", arch)
			}
		}
		return
	}
}

// runEntrypoint unpacks the image's root filesystem and runs its entrypoint
// and command there (chroot, the image's user and environment) until
// /healthz answers.
func runEntrypoint(t *testing.T, img v1.Image) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running the image's entrypoint chrooted needs root")
	}
	rootfs := t.TempDir()
	if err := unpack(img, rootfs); err != nil {
		t.Fatal(err)
	}
	// A container runtime provides /dev/null; so does this runner.
	if err := os.MkdirAll(filepath.Join(rootfs, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(rootfs, "dev/null"), syscall.S_IFCHR|0o666, int(devNull())); err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	port, err := testkit.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	args := append(append([]string{}, c.Entrypoint[1:]...), c.Cmd...)
	args = append(args, "--port", strconv.Itoa(port))
	cmd := exec.Command(filepath.Join(rootfs, c.Entrypoint[0]), args...)
	cmd.Path = c.Entrypoint[0] // resolved inside the chroot
	cmd.Dir = c.WorkingDir
	// No second listener on the shared 127.0.0.1:8080.
	cmd.Env = append(append([]string{}, c.Env...), "FLYTE_MANAGER_CONSOLE_LOCALLISTEN=")
	uidGid := strings.Split(c.User, ":")
	u, _ := strconv.Atoi(uidGid[0])
	g, _ := strconv.Atoi(uidGid[1])
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}, Setpgid: true}
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	if msg := testkit.Poll(60*time.Second, 100*time.Millisecond, func() string {
		select {
		case err := <-exited:
			exited <- err
			return ""
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status
		}
		return ""
	}); msg != "" {
		t.Fatalf("%s never answered: %s\n%s", url, msg, out.Tail(40))
	}
	select {
	case err := <-exited:
		t.Fatalf("the entrypoint exited: %v\n%s", err, out.Tail(40))
	default:
	}
	// It wrote its data as the image's user, in the image's data dir.
	fi, err := os.Stat(filepath.Join(rootfs, managerHome, "flyte-manager.db"))
	if err != nil {
		t.Fatalf("no database in %s: %v\n%s", managerHome, err, out.Tail(40))
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
		t.Errorf("the database belongs to uid %d, want %d", st.Uid, uid)
	}
}

// unpack writes an image's flattened filesystem into dir with its modes
// and owners.
func unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
		if err := os.Lchown(path, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(path, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
			return err
		}
	}
}

// modeBits carries a tar mode's sticky bit over to os.FileMode.
func modeBits(m int64) os.FileMode {
	if m&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// devNull is /dev/null's device number on this host.
func devNull() uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/dev/null", &st) != nil {
		return 1<<8 | 3
	}
	return st.Rdev
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
