package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// Layout of the work directory:
//
//	<WorkDir>/.executor.lock                       held while a driver runs
//	<WorkDir>/<org|_>/<project>/<domain>/<run>/<action>/<attempt>/
//	    work/          the attempt's working directory (the bundle is extracted here), kept
//	    attempt.log    its stdout, stderr and the manager's notes (process package format)
//	    process.json   the process group's identity, written before the attempt counts as RUNNING
//	    secrets/       the secret files the task requested (0700, files 0600), removed at its end
//
// An attempt's working directory is not removed when the attempt ends (on
// success, failure, abort, retry, where the next attempt gets a directory
// of its own, or restart recovery). With file:// storage the SDK's
// File.from_local and Dir.from_local return the absolute local path of what
// the task wrote instead of uploading it, so a returned File or Dir, also
// one inside a dataclass, points into this directory: downstream tasks and
// the user read it there for as long as the run's data lives: the run's
// directory goes when retention collects the run (RunDir,
// internal/retention), except the attempts a cache entry still points at.
// The code bundle the runtime extracts here stays too: a task may return one
// of its files, and the manager cannot tell where outputs point (a
// dataclass's fields are opaque to it). Only secrets/, which the manager
// placed, goes at the attempt's end.
const (
	lockFile     = ".executor.lock"
	cwdDir       = "work"
	logFile      = "attempt.log"
	identityFile = "process.json"
)

// segment checks that s can be one path element.
func segment(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
		return errs.Invalidf("%s %q cannot name a directory", what, s)
	}
	return nil
}

// attemptDir is the directory of attempt n of key.
func attemptDir(workDir string, key store.ActionKey, n int32) (string, error) {
	run, err := RunDir(workDir, key.RunKey)
	if err != nil {
		return "", err
	}
	if err := segment("action", key.Name); err != nil {
		return "", err
	}
	if n < 1 {
		return "", errs.Invalidf("attempt %d: attempts are 1-based", n)
	}
	return filepath.Join(run, key.Name, strconv.Itoa(int(n))), nil
}

// RunDir is the directory that holds the attempt directories of every
// action of a run: <workDir>/<org|_>/<project>/<domain>/<run>.
func RunDir(workDir string, key store.RunKey) (string, error) {
	org := key.Org
	if org == "" {
		org = "_"
	}
	for _, p := range []struct{ what, v string }{
		{"org", org}, {"project", key.Project}, {"domain", key.Domain}, {"run", key.RunName},
	} {
		if err := segment(p.what, p.v); err != nil {
			return "", err
		}
	}
	return filepath.Join(workDir, org, key.Project, key.Domain, key.RunName), nil
}

// identityRecord is process.json: enough to find and stop the attempt's
// process group after the manager that started it is gone.
type identityRecord struct {
	Action   string           `json:"action"`
	Attempt  int32            `json:"attempt"`
	Identity process.Identity `json:"identity"`
	// User is who the process ran as (absent: the manager's user): a
	// restarted manager holds it back from new attempts until it has
	// stopped what is left of this one.
	User    runas.User `json:"user,omitzero"`
	Started time.Time  `json:"started"`
}

// writeIdentity stores rec durably in dir: written to a temporary file,
// synced, renamed into place, and the directory synced, so that after a
// crash the file is either complete or absent.
func writeIdentity(dir string, rec identityRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, identityFile+".*")
	if err != nil {
		return fmt.Errorf("record process identity: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("record process identity: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, identityFile)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("record process identity: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// readIdentity loads process.json from dir; ok is false when there is none.
func readIdentity(dir string) (rec identityRecord, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, identityFile))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("%s is unreadable: %w", filepath.Join(dir, identityFile), err)
	}
	return rec, true, nil
}
