package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/mgrproc"
)

// A home that already exists with the modes mkdir and older managers left
// (the home, blobs and work 0755, the database and signing key 0644) is
// made private by start: the home and its directories 0700, the database,
// the -wal and -shm SQLite makes beside it and the key 0600, and every file
// created below it 0600.
func TestStartMakesDataPrivate(t *testing.T) {
	home := isolate(t)
	for _, d := range []string{home, filepath.Join(home, "blobs"), filepath.Join(home, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // whatever the test's umask
			t.Fatal(err)
		}
	}
	db := filepath.Join(home, "flyte-manager.db")
	key := filepath.Join(home, "signing.key")
	for p, content := range map[string]string{db: "", key: "an-older-managers-key\n"} { // an empty file is a new database to SQLite
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	addr := launch(t, home).addr(t)
	if status, body := waitReady(t, addr); status != 200 {
		t.Fatalf("/readyz = %d %q", status, body)
	}

	// As root, attempts run as users of their own (executor.local.runAs's
	// default), and the work and blob directories belong to their group.
	shared := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		shared = 0o750
	}
	want := map[string]os.FileMode{
		home:                         0o700,
		filepath.Join(home, "blobs"): shared,
		filepath.Join(home, "work"):  shared,
		db:                           0o600,
		db + "-wal":                  0o600, // the database is open in WAL mode: both exist now
		db + "-shm":                  0o600,
		key:                          0o600,
	}
	for p, mode := range want {
		info, err := os.Stat(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if got := info.Mode().Perm(); got != mode {
			t.Errorf("%s has mode %04o, want %04o", p, got, mode)
		}
	}
	// Everything else start created below the home (the work dir's lock
	// file, the blob store's, the image store's and the secrets' files) is
	// private too: nothing for other users, and for the group only where it
	// is the attempts' own. What is below a 0700 directory is out of reach.
	err := filepath.Walk(home, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		perm := info.Mode().Perm()
		if perm&0o007 != 0 {
			t.Errorf("%s has mode %04o, open to other users", p, perm)
		}
		if gid := info.Sys().(*syscall.Stat_t).Gid; perm&0o070 != 0 && gid != config.DefaultRunAsFirstUID {
			t.Errorf("%s has mode %04o and group %d, not the attempts' group %d", p, perm, gid, config.DefaultRunAsFirstUID)
		}
		if info.IsDir() && p != home && perm&0o077 == 0 {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A home another user owns is refused with a message that names it and
// says what to do; nothing is created in it.
func TestStartRefusesAHomeOfAnotherUser(t *testing.T) {
	isolate(t)
	home := "/" // root's: another user's unless the test runs as root
	if os.Geteuid() == 0 {
		home = filepath.Join(t.TempDir(), "nobodys")
		if err := os.Mkdir(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(home, 0o755); err != nil { // whatever the test's umask
			t.Fatal(err)
		}
		if err := os.Chown(home, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	m := launch(t, home)
	select {
	case c := <-m.code:
		m.exit = &c
		if c == 0 {
			t.Fatalf("start on a home of another user ended well:\n%s", m.stdout)
		}
	case <-m.stdout.Await(mgrproc.ServingURL):
		t.Fatalf("start served on a home of another user:\n%s", m.stdout)
	}
	msg := m.stderr.String()
	for _, want := range []string{"data directory " + home + " is owned by uid", "this user (uid " + strconv.Itoa(os.Geteuid()) + ")", "choose another --home"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if os.Geteuid() == 0 {
		if info, err := os.Stat(home); err != nil || info.Mode().Perm() != 0o755 {
			t.Errorf("the refused home changed: %v %v", info, err)
		}
		if entries, err := os.ReadDir(home); err != nil || len(entries) != 0 {
			t.Errorf("the refused home holds %v (%v)", entries, err)
		}
	}
}
