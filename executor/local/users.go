package local

import (
	"fmt"
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
	if b := d.state.Blobs(); b != nil && b.Kind() == blob.KindFile {
		dirs = append(dirs, b.URI(""))
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
// mode 3770, the group's, sticky so that no attempt removes another's.
func (d *Driver) openRunBase(runBase string) error {
	if !d.users.Separate() || !filepath.IsAbs(runBase) {
		return nil
	}
	if err := os.MkdirAll(runBase, 0o750); err != nil {
		return err
	}
	if err := os.Chown(runBase, -1, int(d.users.Group())); err != nil {
		return err
	}
	return os.Chmod(runBase, os.ModeSetgid|os.ModeSticky|0o770)
}
