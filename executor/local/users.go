package local

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"fmgr.dev/internal/blob"
)

// The manager's side of running attempts as other users (package runas,
// executor.local.runAs). Attempts are all in one group (runas.Leaser.Group):
// the work and blob directories belong to it (mode 2750: the group may
// enter and read, and what is created in them inherits the group), and the
// manager's umask becomes 027 so that what it writes there (inputs, code
// bundles, attempt directories) is readable by that group and nobody else.
// What is the manager's alone stays so: the database and the keys are
// created 0600, attempt logs and process records 0600, secrets belong to
// the attempt's own uid. Each attempt's process runs with umask 077 in a
// mount namespace where directories others may not search (the home,
// /root) are empty but for what it needs (process/confine_linux.go).

// managerUmask is the manager's umask while attempts run as other users.
const managerUmask = 0o027

// dataDirs are the directories attempts of other users must reach: the
// work directory and, with file storage, the blob directory.
func (d *Driver) dataDirs() []string {
	dirs := []string{d.cfg.WorkDir}
	if d.cfg.Environments.Dir != "" {
		dirs = append(dirs, d.cfg.Environments.Dir) // attempts run their image's interpreter from there
	}
	if b := d.state.Blobs(); b != nil && b.Kind() == blob.KindFile {
		dirs = append(dirs, b.Dir())
	}
	return dirs
}

// openToAttempts gives the data directories to the attempts' group and
// sets the manager's umask (see above). Files that an older manager made
// private before are not changed: attempts cannot read them.
func (d *Driver) openToAttempts() error {
	if !d.users.Separate() {
		return nil
	}
	syscall.Umask(managerUmask)
	gid := int(d.users.Group())
	for _, dir := range d.dataDirs() {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("executor: %w", err)
		}
		if err := os.Chown(dir, -1, gid); err != nil {
			return fmt.Errorf("executor: give %s to the attempts' group %d: %w", dir, gid, err)
		}
		if err := os.Chmod(dir, os.ModeSetgid|0o750); err != nil {
			return fmt.Errorf("executor: %w", err)
		}
	}
	return nil
}

// openRunBase lets the attempts' group create entries in a run's output
// base on file storage (a parent task writes its children's inputs there):
// mode 3770, the group's, sticky so that no attempt removes another's, and
// a default ACL that gives the group write access to what is made below.
func (d *Driver) openRunBase(runBase string) error {
	if !d.users.Separate() || !filepath.IsAbs(runBase) {
		return nil
	}
	if _, err := syscall.Getxattr(runBase, "system.posix_acl_default", nil); err == nil {
		return nil // opened by an earlier attempt of the run
	}
	if err := os.MkdirAll(runBase, 0o750); err != nil {
		return err
	}
	// What the manager already wrote there (a recovered action's outputs
	// and inputs) becomes the group's to write as well.
	err := filepath.WalkDir(runBase, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == runBase || e.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		if e.IsDir() {
			_ = syscall.Setxattr(path, "system.posix_acl_default", groupACL, 0)
			return os.Chmod(path, info.Mode().Perm()|0o070|info.Mode()&os.ModeSetgid)
		}
		return os.Chmod(path, info.Mode().Perm()|0o060)
	})
	if err != nil {
		return err
	}
	if err := os.Chown(runBase, -1, int(d.users.Group())); err != nil {
		return err
	}
	if err := os.Chmod(runBase, os.ModeSetgid|os.ModeSticky|0o770); err != nil {
		return err
	}
	// What anyone creates below (the manager recovering an action's
	// outputs, a parent task its child's inputs, in one directory) the
	// group may write too, whatever the creator's umask.
	if err := syscall.Setxattr(runBase, "system.posix_acl_default", groupACL, 0); err != nil {
		return fmt.Errorf("default ACL on %s: %w", runBase, err)
	}
	return nil
}

// groupACL is the xattr form of the ACL u::rwx,g::rwx,o::--- (version 2,
// then each entry's tag, permissions and id, little-endian).
var groupACL = []byte{
	2, 0, 0, 0,
	0x01, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, // ACL_USER_OBJ
	0x04, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, // ACL_GROUP_OBJ
	0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, // ACL_OTHER
}
