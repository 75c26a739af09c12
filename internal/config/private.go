package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// The data directory holds the database, the blobs (every run's inputs and
// outputs), the attempts' work dirs and logs, the signing key and the
// secrets keyring: nothing in it is for other local users. The manager
// keeps it private in two ways:
//
//   - the process umask becomes 077, so whatever the manager, SQLite, the
//     blob store and the local executor's task processes (which inherit it)
//     create from then on is 0600 (files) or 0700 (directories);
//   - the home itself, and what the manager keeps directly in it that
//     already exists (left by an older version, or made by hand), is
//     tightened to 0700 / 0600, which the manager may do because it must own
//     the home. A home owned by another user is refused: whoever owns it can
//     replace what is in it.

// privateUmask is the umask the manager runs with.
const privateUmask = 0o077

// makePrivate sets the process umask and creates the home, or makes an
// existing one private, as described above.
func (c *Config) makePrivate() error {
	syscall.Umask(privateUmask)
	if err := os.MkdirAll(c.Home, 0o700); err != nil {
		return fmt.Errorf("creating data directory: %w", err)
	}
	if err := makeOwnPrivate(c.Home, true, false); err != nil {
		return err
	}
	shared := c.sharedWithAttempts()
	for _, p := range c.dataInHome() {
		if err := makeOwnPrivate(p, false, slices.Contains(shared, p)); err != nil {
			return err
		}
	}
	return nil
}

// sharedWithAttempts are the directories the local executor shares with
// the attempts' group when attempts run as other users (a manager running
// as root, executor.local.runAs not manager): the work directory and a
// file store's directory. They keep their group permissions here, so that
// another command on the same home (migrate, secrets rotate-key) does not
// shut a running manager's attempts out of them.
func (c *Config) sharedWithAttempts() []string {
	if c.Executor.Type != ExecutorLocal || c.Executor.Local.RunAs.Mode == RunAsManager || os.Geteuid() != 0 {
		return nil
	}
	dirs := []string{c.Executor.Local.WorkDir}
	if u, err := url.Parse(c.Storage.URL); err == nil && u.Scheme == "file" {
		dirs = append(dirs, filepath.Clean(filepath.FromSlash(u.Path)))
	}
	return dirs
}

// dataInHome is what the manager itself keeps directly in the home, as
// configured: paths configured elsewhere are the operator's to set up (a
// file store shared with Pods, say), and a SQLite database is made
// private by internal/db wherever it is.
func (c *Config) dataInHome() []string {
	var paths []string
	add := func(p string) {
		if p != "" && filepath.Dir(p) == c.Home {
			paths = append(paths, p)
		}
	}
	if u, err := url.Parse(c.Storage.URL); err == nil && u.Scheme == "file" {
		add(filepath.Clean(filepath.FromSlash(u.Path)))
	}
	add(c.Executor.Local.WorkDir)
	add(filepath.Join(c.Home, SigningKeyFile))
	add(c.Secrets.KeyFile)
	return paths
}

// makeOwnPrivate refuses p when another user owns it and otherwise takes
// group and other permissions away from it (0700 for a directory, 0600 for
// a file). A path that does not exist is fine: it will be created private.
// home says p is the home, which must exist and be a directory. group
// says p's group keeps its permissions (and p its set-group-id bit): only
// others' go.
func makeOwnPrivate(p string, home, group bool) error {
	info, err := os.Stat(p)
	if !home && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if home && !info.IsDir() {
		return fmt.Errorf("data directory %s is not a directory; choose another --home", p)
	}
	what := "data directory"
	if !home {
		what = "data file"
		if info.IsDir() {
			what = "data directory"
		}
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s %s is owned by uid %d, not by this user (uid %d): the manager keeps its database, blobs and keys there "+
			"and must own them; run it as that user, chown the directory to this one, or choose another --home", what, p, st.Uid, os.Geteuid())
	}
	mode, strip := info.Mode().Perm(), os.FileMode(0o077)
	if group {
		strip = 0o007
	}
	if mode&strip == 0 {
		return nil
	}
	want := mode &^ strip
	if group {
		want |= info.Mode() & os.ModeSetgid
	}
	if err := os.Chmod(p, want); err != nil {
		return fmt.Errorf("%s %s is readable by other users (mode %04o) and could not be made private (%w); run chmod go-rwx %s",
			what, p, mode, err, p)
	}
	return nil
}
