//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Enabled reports whether this build kills at armed failpoints.
const Enabled = true

// armed is the point FLYTE_MANAGER_FAILPOINT names and the hit that kills.
var armed = parse(os.Getenv("FLYTE_MANAGER_FAILPOINT"))

var hits atomic.Int64

type spec struct {
	name string
	at   int64
}

// parse reads "name" or "name@N"; anything unreadable arms nothing and says
// so, so that a typo in a test shows up as "the failpoint never fired" with
// a reason in the manager's output.
func parse(v string) spec {
	if v == "" {
		return spec{}
	}
	name, n, hasN := strings.Cut(v, "@")
	at := int64(1)
	if hasN {
		parsed, err := strconv.ParseInt(n, 10, 64)
		if err != nil || parsed < 1 {
			fmt.Fprintf(os.Stderr, "failpoint: ignoring FLYTE_MANAGER_FAILPOINT=%q: want name or name@N with N >= 1\n", v)
			return spec{}
		}
		at = parsed
	}
	return spec{name: name, at: at}
}

// Hit kills the process with SIGKILL when name is the armed point and this
// is the hit it waits for.
func Hit(name string) {
	if armed.name == "" || name != armed.name {
		return
	}
	if hits.Add(1) != armed.at {
		return
	}
	line := fmt.Sprintf("failpoint %s fired on hit %d in pid %d\n", name, armed.at, os.Getpid())
	if mark := os.Getenv("FLYTE_MANAGER_FAILPOINT_MARK"); mark != "" {
		if f, err := os.OpenFile(mark, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, _ = f.WriteString(line)
			_ = f.Close()
		}
	}
	os.Stderr.WriteString(line)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught: nothing after this point runs
}
