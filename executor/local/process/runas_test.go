package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"fmgr.dev/executor/local/runas"
	"fmgr.dev/internal/testkit"
)

// testUser is a uid of the default range that no process runs as.
var testUser = runas.User{UID: 2000000000 + 4242, GID: 2000000000 + 4242}

// statusScript writes the ids and no_new_privs of the process to ./status.
const statusScript = `grep -E "^(Uid|Gid|Groups|NoNewPrivs):" /proc/self/status > status`

// checkRanAs checks ./status of a task run as u, and that its working
// directory is u's alone.
func checkRanAs(t *testing.T, dir string, u runas.User) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatalf("the task wrote no status: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, ":")
		got[k] = strings.Join(strings.Fields(v), " ")
	}
	id := func(n uint32) string { s := strconv.FormatUint(uint64(n), 10); return s + " " + s + " " + s + " " + s }
	if got["Uid"] != id(u.UID) || got["Gid"] != id(u.GID) || got["Groups"] != "" || got["NoNewPrivs"] != "1" {
		t.Errorf("the task ran as %q, want uid and gid %d/%d, no groups, NoNewPrivs 1", got, u.UID, u.GID)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != u.UID || st.Gid != u.GID || fi.Mode().Perm() != 0o700 {
		t.Errorf("working directory %s is %d:%d %v, want the user's, 0700", dir, st.Uid, st.Gid, fi.Mode().Perm())
	}
}

func runAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can start a process as another user")
	}
}

// taskAttempt is an attempt under a TaskDir (the user must pass through).
func taskAttempt(t *testing.T) attempt {
	base := testkit.TaskDir(t)
	return attempt{dir: filepath.Join(base, "work"), log: filepath.Join(base, "logs", "attempt.log")}
}

// A plainly started attempt with a User runs as that uid and gid, with no
// supplementary groups and no_new_privs, in a working directory of its own;
// HandBack gives the directory back to the manager afterwards.
func TestPlainStartRunsAsTheUser(t *testing.T) {
	runAsRoot(t)
	a := taskAttempt(t)
	spec := a.spec(statusScript)
	spec.User = testUser
	p := start(t, testRunner(), spec)
	if st := p.Wait(); st.Code != 0 {
		t.Fatalf("status %+v:\n%s", st, logText(t, a.log))
	}
	checkRanAs(t, a.dir, testUser)
	if err := HandBack(a.dir, testUser, testUser.GID); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{a.dir, filepath.Join(a.dir, "status")} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
			t.Errorf("%s still belongs to uid %d after HandBack", path, st.Uid)
		}
	}
}

// A warm-started attempt with a User becomes it in the spare before any of
// the task's code runs: the same ids, groups and no_new_privs as a plain
// start.
func TestWarmStartRunsAsTheUser(t *testing.T) {
	runAsRoot(t)
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	a := taskAttempt(t)
	spec := warmSpec(a, venv, statusScript)
	spec.User = testUser
	p := start(t, r, spec)
	st := p.Wait()
	if !p.Warm() {
		t.Fatalf("not warm-started:\n%s", logText(t, a.log))
	}
	if st.Code != 0 {
		t.Fatalf("status %+v:\n%s", st, logText(t, a.log))
	}
	checkRanAs(t, a.dir, testUser)
}
