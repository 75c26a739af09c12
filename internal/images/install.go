package images

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Builds without root. A build's script runs as its attempt's user (on a
// root manager a uid of the attempts' range, never root, never the
// manager's), so the packages it installs, whose sdists run arbitrary
// code, can touch nothing of the manager's, of the store's or of another
// attempt's. That user owns one thing, its staging directory:
//
//	staging/<id>/        the attempt user's (mode 0700 less nothing else)
//	staging/<id>/env     the environment being built (uv venv --relocatable)
//	staging/<id>/cache   its own uv cache: nothing another build left there
//	                     is trusted (no cross-build cache poisoning), and
//	                     nothing it leaves reaches another build
//	staging/<id>/home    its HOME
//
// The store itself (envs/, locks/, index/) is the manager's: attempts read
// the environments and write nothing there. The manager does everything
// that needs trust:
//
//   - Claim: the key's lock, held by the manager for the whole build (a
//     Go-side map for the builds of this manager, plus the flock of
//     LockFile, which the cache's collection takes too, so that it never
//     removes an environment being replaced). A second build of the key
//     does not build: its process waits (WaitScript) until the first ended
//     and the manager creates its wake file, then it answers with the
//     first's environment;
//   - Install, after the build's process ended: every entry of the staging
//     directory must be the build user's (a file of anyone else's there,
//     say a hard link, fails the build), and a regular file, a directory
//     or a symbolic link; the manager makes them its own (the attempts'
//     group reads them), writes the manifest and the ready mark, takes
//     every write bit away (and setuid/setgid bits: only the permission
//     bits are kept) without following any link, and renames the
//     environment into envs/<key> in one step. When another build got
//     there first (a build this manager did not see, as after a restart)
//     the rename fails and this one is discarded.

const stagingDir = "staging"

// StagingDir is the staging directory of the build that attempt names
// (any string unique to the attempt: its directory).
func (s *Store) StagingDir(attempt string) string {
	sum := sha256.Sum256([]byte(attempt))
	return filepath.Join(s.dir, stagingDir, hex.EncodeToString(sum[:12]))
}

// StagedEnv is where a build whose staging directory is staging makes the
// environment.
func StagedEnv(staging string) string { return filepath.Join(staging, "env") }

// StagingEnv is what a build's process needs in its environment besides
// the manager's (uv's cache and a HOME of its own, in staging).
func StagingEnv(staging string) map[string]string {
	return map[string]string{
		"UV_CACHE_DIR": filepath.Join(staging, "cache"),
		"HOME":         filepath.Join(staging, "home"),
	}
}

// building is a build of a key that this manager runs now.
type building struct {
	lock    *os.File
	waiters []string // wake files of the builds that wait for it
}

// Claim takes key's build. When another build of key runs (ok false),
// the file wake is created once it ended (release called): the caller
// waits for it instead of building. release is idempotent.
func (s *Store) Claim(key, wake string) (release func(), ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, held := s.building[key]; held {
		b.waiters = append(b.waiters, wake)
		return nil, false, nil
	}
	f, err := os.OpenFile(s.LockFile(key), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("the lock of image %s: %w", key, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("image %s is being built by another process on this host (its lock %s is held); run again later",
			key, s.LockFile(key))
	}
	b := &building{lock: f}
	s.building[key] = b
	done := false
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if done {
			return
		}
		done = true
		delete(s.building, key)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		for _, w := range b.waiters {
			// A waiter that ended meanwhile has no directory any more.
			_ = os.WriteFile(w, nil, 0o644)
		}
	}, true, nil
}

// Install moves the environment a build made in staging into the store
// as key's (see above): uid is the build's user, gid the group the
// environment is given to (-1: leave it). reused is true when key's
// environment was there already: this one is discarded. staging is removed
// either way.
func (s *Store) Install(staging string, uid uint32, gid int, key, target string, p *Plan) (reused bool, err error) {
	defer func() { _ = removeTree(staging) }()
	if _, ok := s.Ready(key); ok {
		return true, nil
	}
	env := StagedEnv(staging)
	if fi, err := os.Lstat(env); err != nil || !fi.IsDir() {
		return false, fmt.Errorf("the build left no environment directory in %s", env)
	}
	if err := adopt(env, uid, gid); err != nil {
		return false, err
	}
	if fi, err := os.Stat(filepath.Join(env, "bin", "python")); err != nil || !fi.Mode().IsRegular() {
		return false, errors.New("the environment has no bin/python")
	}
	size, err := dirSize(env)
	if err != nil {
		return false, err
	}
	m := &Manifest{Key: key, FQIN: FQIN(target, key), Name: target, Python: p.Python, SDK: p.SDK, Env: p.Env,
		Bytes: size, Built: time.Now().UTC()}
	for _, name := range []string{manifestFile, manifestFile + ".tmp", readyFile} {
		if err := os.RemoveAll(filepath.Join(env, name)); err != nil {
			return false, err
		}
	}
	if err := writeJSON(filepath.Join(env, manifestFile), m); err != nil {
		return false, err
	}
	if err := os.WriteFile(filepath.Join(env, readyFile), nil, 0o444); err != nil {
		return false, err
	}
	if err := readOnly(env); err != nil {
		return false, err
	}
	if err := os.Rename(env, s.EnvDir(key)); err != nil {
		if _, ok := s.Ready(key); ok {
			return true, nil // another build's, moved in first
		}
		// A leftover that is not ready (an interrupted removal): replace it.
		if rerr := removeTree(s.EnvDir(key)); rerr != nil {
			return false, err
		}
		if err := os.Rename(env, s.EnvDir(key)); err != nil {
			return false, err
		}
	}
	// The environment's own directory last: moving a directory needs
	// write access to it (for a manager that is not root).
	fi, err := os.Lstat(s.EnvDir(key))
	if err != nil {
		return false, err
	}
	return false, os.Chmod(s.EnvDir(key), fi.Mode().Perm()&0o555|0o550)
}

// adopt checks that every entry under root is uid's and a regular file, a
// directory or a symbolic link, and makes them the manager's (and gid's),
// following no link.
func adopt(root string, uid uint32, gid int) error {
	me := os.Getuid()
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner", path)
		}
		rel, _ := filepath.Rel(root, path)
		if st.Uid != uid {
			return fmt.Errorf("the build left %s, owned by uid %d rather than the build's user", rel, st.Uid)
		}
		if t := info.Mode().Type(); t != 0 && t != fs.ModeDir && t != fs.ModeSymlink {
			return fmt.Errorf("the build left %s, which is not a file, a directory or a symbolic link", rel)
		}
		if int(uid) == me && gid < 0 {
			return nil
		}
		return os.Lchown(path, me, gid)
	})
}

// readOnly takes the write bits (and any setuid, setgid or sticky bit)
// from everything under root but root itself, lets the group read
// everything (and search directories, run what its owner may run), and
// follows no link (chmod would change the link's target).
func readOnly(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		perm := info.Mode().Perm()&0o555 | 0o440
		if d.IsDir() || perm&0o100 != 0 {
			perm |= 0o110
		}
		return os.Chmod(path, perm)
	})
}

// removeTree removes dir, giving its owner write access to its
// directories where that is needed (a read-only environment of a manager
// that is not root). os.RemoveAll follows no link.
func removeTree(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || os.Geteuid() == 0 {
		// Root needs no write access; nor does it chmod what a build's
		// user might still swap for a link.
		return err
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
