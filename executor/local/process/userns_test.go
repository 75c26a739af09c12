package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserNamespace: a process with Spec.UserNS is root of a user
// namespace of its own whose ids are the range's, and pid 1 of its own
// pid namespace; on the host it is the range's first uid, never root.
func TestUserNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mapping a range of uids into a user namespace needs root")
	}
	a := newAttempt(t)
	// The namespace's root is no one on the host: it reaches its working
	// directory through the group it is given (as the attempts reach the
	// work directory).
	for _, d := range []string{filepath.Dir(a.dir), filepath.Dir(filepath.Dir(a.dir))} {
		if err := os.Chown(d, 0, 4242); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	s := a.spec(`echo "id=$(id -u):$(id -g) pid=$$"; cat /proc/self/uid_map; cat /proc/self/gid_map; id -G`)
	s.UserNS = &IDRange{First: 2000065536, Count: 65536, Group: 4242}
	st := start(t, testRunner(), s).Wait()
	if st.Code != 0 || st.Err != nil {
		t.Fatalf("status %+v", st)
	}
	out := strings.Join(st.StdoutTail, "\n")
	if !strings.Contains(out, "id=0:0 pid=1") || strings.Count(out, "2000065536") != 2 || !strings.Contains(out, "4242") {
		t.Errorf("the process is not root of its own user and pid namespaces mapped to the range:\n%s", out)
	}
}
