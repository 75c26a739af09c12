package images

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/testkit"
)

// TestConcurrentBuildsBuildOnce: the manager holds the key's lock for a
// build (Claim); a second build of the key at the same time builds
// nothing: its process (WaitScript) says in its log that it waits, and
// ends once the first's environment is installed and the lock released.
func TestConcurrentBuildsBuildOnce(t *testing.T) {
	dir := t.TempDir()
	s := NewStore(filepath.Join(dir, "store"), 0, slog.New(slog.DiscardHandler))
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(dir, "calls")
	uv := filepath.Join(dir, "uv")
	// uv venv --relocatable --no-config --quiet --python PY ENV
	fake := fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %s\nif [ \"$1\" = venv ]; then mkdir -p \"$7/bin\" && : > \"$7/bin/python\" && chmod 755 \"$7/bin/python\"; fi\n", calls)
	if err := os.WriteFile(uv, []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Analyse(&ib.ImageSpec{BaseImage: sdkBase, Layers: []*ib.Layer{pip("humanize")}})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("e", 32)
	release, ok, err := s.Claim(key, filepath.Join(dir, "first.wake"))
	if err != nil || !ok {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	wake := filepath.Join(dir, "second.wake")
	if _, ok, err := s.Claim(key, wake); err != nil || ok {
		t.Fatalf("second claim while the first builds: ok %v, %v", ok, err)
	}
	if s.remove(key) {
		t.Error("the cache's collection took the lock of a key being built")
	}
	waitOut := &testkit.Buffer{}
	waiter := exec.Command("/bin/sh", "-c", WaitScript(key, wake))
	waiter.Stdout, waiter.Stderr = waitOut, waitOut
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waitOut.AwaitText("waiting for it"):
	case <-time.After(30 * time.Second):
		t.Fatalf("the second build does not say it waits:\n%s", waitOut.String())
	}
	staging := s.StagingDir("first")
	if err := os.MkdirAll(staging, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", "-c", s.Script(p, key, uv, "3.11", "", staging)).CombinedOutput(); err != nil {
		t.Fatalf("the first build: %v\n%s", err, out)
	}
	if _, err := os.Stat(wake); err == nil {
		t.Fatal("the waiter was woken before the first build was installed and released")
	}
	if reused, err := s.Install(staging, uint32(os.Getuid()), -1, key, "img:1", p); err != nil || reused {
		t.Fatalf("install: reused %v, %v", reused, err)
	}
	release()
	release() // idempotent
	if err := waiter.Wait(); err != nil {
		t.Fatalf("the waiting build: %v\n%s", err, waitOut.String())
	}
	if _, ok := s.Ready(key); !ok {
		t.Fatal("the environment is not ready")
	}
	b, _ := os.ReadFile(calls)
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "venv pip pip" {
		t.Errorf("uv was called for %v, want one build's venv and two installs (the SDK, the layer)", got)
	}
	// Free again; a second install of the key is discarded.
	again, ok, err := s.Claim(key, "")
	if err != nil || !ok {
		t.Fatalf("claim after release: %v %v", ok, err)
	}
	defer again()
	staging = s.StagingDir("late")
	if err := os.MkdirAll(filepath.Join(StagedEnv(staging), "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if reused, err := s.Install(staging, uint32(os.Getuid()), -1, key, "img:1", p); err != nil || !reused {
		t.Errorf("install of a key installed already: reused %v, %v", reused, err)
	}
	if _, err := os.Stat(staging); err == nil {
		t.Error("the discarded build's staging directory is still there")
	}
}

// buildUID is the user a test build runs as on a root manager (in the
// attempts' default range).
const buildUID = 64999

// stageAs makes a staged environment owned by uid: bin/python, a setuid
// script, a link to a file outside.
func stageAs(t *testing.T, s *Store, name string, uid int, outside string) string {
	t.Helper()
	staging := s.StagingDir(name)
	env := StagedEnv(staging)
	for path, mode := range map[string]fs.FileMode{"bin/python": 0o755, "bin/tool": 0o4777, "lib/mod.py": 0o666} {
		full := filepath.Join(env, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(env, "bin", "outside")); err != nil {
		t.Fatal(err)
	}
	if uid != os.Getuid() {
		if err := filepath.WalkDir(staging, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, uid, uid)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return staging
}

// TestInstallTakesTheEnvironment: what a build (as another user on a root
// manager) staged becomes the manager's, with no write bit, no setuid bit,
// and no change to what a link points at; the build's user cannot write
// in it any more. A build that left a file of someone else's, or a
// special file, is rejected.
func TestInstallTakesTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // for the build's user to reach it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := NewStore(filepath.Join(dir, "store"), 0, slog.New(slog.DiscardHandler))
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "outside")
	if err := os.WriteFile(outside, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(outside, 0o666)
	uid := os.Getuid()
	root := uid == 0
	if root {
		uid = buildUID
	}
	p := &Plan{Python: "3.11"}
	key := strings.Repeat("f", 32)
	staging := stageAs(t, s, "good", uid, outside)
	if reused, err := s.Install(staging, uint32(uid), -1, key, "img:1", p); err != nil || reused {
		t.Fatalf("install: reused %v, %v", reused, err)
	}
	env := s.EnvDir(key)
	err := filepath.WalkDir(env, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st := info.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
			t.Errorf("%s is uid %d's, not the manager's", path, st.Uid)
		}
		if d.Type()&fs.ModeSymlink == 0 && info.Mode()&(0o222|fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s is %v: writable or setuid", path, info.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("the link's target was changed: %v %v", fi.Mode(), err)
	}
	if _, ok := s.Ready(key); !ok {
		t.Error("the installed environment is not ready")
	}
	if _, err := os.Stat(staging); err == nil {
		t.Error("the staging directory is still there")
	}
	if root {
		for _, target := range []string{filepath.Join(env, "new"), filepath.Join(env, "lib", "mod.py")} {
			cmd := exec.Command("/bin/sh", "-c", `echo x >> "$0"`, target)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: buildUID, Gid: buildUID}}
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("the build's user wrote %s after the install (%s)", target, out)
			}
		}
	}

	// Rejected: a file of another user (root only), a fifo.
	bad := strings.Repeat("0", 32)
	staging = stageAs(t, s, "fifo", uid, outside)
	if err := syscall.Mkfifo(filepath.Join(StagedEnv(staging), "lib", "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	if root {
		_ = os.Lchown(filepath.Join(StagedEnv(staging), "lib", "pipe"), uid, uid)
	}
	if _, err := s.Install(staging, uint32(uid), -1, bad, "img:1", p); err == nil || !strings.Contains(err.Error(), "not a file") {
		t.Errorf("a staged fifo: %v", err)
	}
	if root {
		staging = stageAs(t, s, "foreign", uid, outside)
		if err := os.Lchown(filepath.Join(StagedEnv(staging), "lib", "mod.py"), 0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Install(staging, uint32(uid), -1, bad, "img:1", p); err == nil || !strings.Contains(err.Error(), "owned by uid 0") {
			t.Errorf("a staged file of root's: %v", err)
		}
	}
	if _, err := os.Lstat(s.EnvDir(bad)); err == nil {
		t.Error("a rejected build was installed")
	}
}
