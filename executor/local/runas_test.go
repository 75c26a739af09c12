package local

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/testkit"
)

// As root with the default executor.local.runAs, two attempts running at
// once run as two different uids of the default range, with no
// supplementary groups and no_new_privs; neither can enter the other's
// working directory, and once they ended their uids are free again and
// their working directories the manager's.
func TestAttemptsRunAsUsersOfTheRange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a manager running as root runs attempts as other users")
	}
	eachDB(t, func(t *testing.T, h *harness) {
		d := h.driver()
		// Each waits for the other's notes, so both run at once until both
		// peeked.
		script := func(me, other string) string {
			return `grep -E "^(Uid|Groups|NoNewPrivs):" /proc/self/status | tr -s "\t" " " > "$SHARED/` + me + `.status"
pwd > "$SHARED/` + me + `.cwd"
while [ ! -e "$SHARED/` + other + `.cwd" ]; do sleep 0.05; done
if ls "$(cat "$SHARED/` + other + `.cwd")" >/dev/null 2>&1; then echo entered > "$SHARED/` + me + `.peek"; else echo refused > "$SHARED/` + me + `.peek"; fi
while [ ! -e "$SHARED/` + other + `.peek" ]; do sleep 0.05; done
` + succeed
		}
		a := h.run("ruser-a", script("a", "b"), taskOpts{})
		b := h.run("ruser-b", script("b", "a"), taskOpts{})
		h.terminal(a, phase.Succeeded, time.Minute)
		h.terminal(b, phase.Succeeded, time.Minute)
		uids := map[string]bool{}
		for _, me := range []string{"a", "b"} {
			st := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(h.readShared(me+".status")), "\n") {
				k, v, _ := strings.Cut(line, ":")
				st[k] = strings.TrimSpace(v)
			}
			ids := strings.Fields(st["Uid"])
			if len(ids) != 4 || ids[0] != ids[1] || ids[0] != ids[2] || ids[0] != ids[3] {
				t.Fatalf("attempt %s: Uid line %q", me, st["Uid"])
			}
			uid, _ := strconv.ParseUint(ids[0], 10, 32)
			if uid < config.DefaultRunAsFirstUID || uid >= config.DefaultRunAsFirstUID+config.DefaultRunAsCount {
				t.Errorf("attempt %s ran as uid %d, not one of the default range", me, uid)
			}
			uids[ids[0]] = true
			if st["Groups"] != "" || st["NoNewPrivs"] != "1" {
				t.Errorf("attempt %s: groups %q, NoNewPrivs %q; want none and 1", me, st["Groups"], st["NoNewPrivs"])
			}
			if got := strings.TrimSpace(h.readShared(me + ".peek")); got != "refused" {
				t.Errorf("attempt %s could enter the other's working directory (%s)", me, got)
			}
			fi, err := os.Stat(strings.TrimSpace(h.readShared(me + ".cwd")))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o755 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("attempt %s's working directory is %v after it ended, want 0755 (handed back)", me, fi.Mode().Perm())
			}
		}
		if len(uids) != 2 {
			t.Errorf("both attempts ran as the same uid: %v", uids)
		}
		testkit.Eventually(t, "the uids to be released", 10*time.Second, func() bool { return d.users.Held() == 0 })
	})
}
