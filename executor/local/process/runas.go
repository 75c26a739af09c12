package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"fmgr.dev/executor/local/runas"
)

// Running an attempt as another user (Spec.User, package runas): the
// process starts as that uid and gid with no supplementary groups and
// no_new_privs (no setuid binary or file capability gives it back
// privileges), and its working directory is its own, mode 0700, so no
// other attempt can enter it while it runs. A plain start gets that from
// the fork (Credential; no_new_privs is set on the forking thread, which
// the child inherits and which is discarded afterwards, see the package
// comment on Pdeathsig); a warm start from the spare, which drops to the
// user before any of the task's code or the SDK's loop threads run
// (warm_server.py).

// prSetNoNewPrivs is PR_SET_NO_NEW_PRIVS (linux/prctl.h).
const prSetNoNewPrivs = 38

// setCredential makes attr start the child as u, with no supplementary
// groups; nothing for the manager's own user.
func setCredential(attr *syscall.SysProcAttr, u runas.User) {
	if !u.Other() {
		return
	}
	attr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
}

// noNewPrivsThread sets no_new_privs on the calling OS thread, which must
// be locked and never unlocked (the children it forks inherit it).
func noNewPrivsThread(u runas.User) error {
	if !u.Other() {
		return nil
	}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("process: no_new_privs: %w", errno)
	}
	return nil
}

// giveDir makes dir u's own, mode 0700 (nothing for the manager's user).
func giveDir(dir string, u runas.User) error {
	if !u.Other() {
		return nil
	}
	if err := os.Chown(dir, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("process: give the working directory to %s: %w", u, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("process: working directory: %w", err)
	}
	return nil
}

// GiveDir makes dir (which must exist) u's own, mode 0700: a directory an
// attempt running as u writes, such as its secrets or its outputs.
func GiveDir(dir string, u runas.User) error { return giveDir(dir, u) }

// HandBack gives everything under root that u owns back to the manager's
// user and to group gid (the attempts' group) once no process of u runs
// any more, so that a later attempt given the same uid finds nothing of
// this one's, and makes it readable by that group (directories also
// searchable), and root 0755: what the attempt left (files a task
// returned) is read by downstream tasks, which run as other users of the
// group. Nothing for the manager's user or a root that does not exist.
func HandBack(root string, u runas.User, gid uint32) error {
	if !u.Other() {
		return nil
	}
	uid := os.Getuid()
	var errs []error
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != u.UID {
			return nil
		}
		if err := os.Lchown(path, uid, int(gid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		mode := info.Mode()
		want := mode.Perm() | 0o040
		if d.IsDir() {
			want |= 0o010
		}
		if path == root {
			want = 0o755
		}
		if mode&fs.ModeSymlink == 0 && want != mode.Perm() {
			if err := os.Chmod(path, want); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
