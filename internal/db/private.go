package db

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// privateSQLite makes a SQLite database readable by this user only, before
// SQLite opens it: its directory is created 0700, the database file 0600,
// and an existing database file, -wal or -shm that other users may read is
// tightened to 0600. SQLite creates -wal and -shm with the database file's
// own mode, whatever the umask, so one database file of mode 0644 would hand
// every later write-ahead log to other local users as well. A file another
// user owns is refused: this user could not keep it private.
func privateSQLite(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create database directory %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close() // a new, empty database: SQLite fills it in
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create database file %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("database file: %w", err)
		}
		mode := info.Mode().Perm()
		if mode&0o077 == 0 {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("database file %s is readable by other users (mode %04o) and owned by uid %d, not by this user (uid %d); "+
				"chown it to this user or run the manager as its owner", p, mode, st.Uid, os.Geteuid())
		}
		if err := os.Chmod(p, mode&^0o077); err != nil {
			return fmt.Errorf("database file %s is readable by other users (mode %04o) and could not be made private (%w); run chmod 600 %s", p, mode, err, p)
		}
	}
	return nil
}
