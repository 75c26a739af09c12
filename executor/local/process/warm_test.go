package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The warm-start tests run the real SDK's a0 (FM_TEST_VENV). To look at the
// process a warm child becomes without a whole task, they use a0's own
// _F_EXEC_WRAPPER hook: once a0 has parsed its arguments it execs the
// wrapper (here a shell script) in place, in the attempt's process, with
// its environment, directory, descriptors and group.

// warmArgs are arguments a0 accepts (the wrapper runs before they are used).
var warmArgs = []string{"a0", "--inputs", "in", "--outputs-path", "out", "--version", "v1"}

// warmEnv is an attempt's environment in these tests.
func warmEnv(venv string, extra ...string) []string {
	return append([]string{"PATH=" + filepath.Join(venv, "bin") + ":/usr/bin:/bin", "LANG=C", "PYTHONUNBUFFERED=1", "_U_RUN_BASE=/tmp/rb"}, extra...)
}

// warmRunner returns a runner whose warm server is ready.
func warmRunner(t *testing.T, venv string) *Runner {
	t.Helper()
	r := NewRunner(Config{BinDir: filepath.Join(venv, "bin"), KillGrace: time.Minute, DrainTimeout: time.Minute, WarmStart: true})
	t.Cleanup(r.Close)
	waitWarm(t, r, warmEnv(venv))
	return r
}

// waitWarm waits until the runner would warm-start an attempt with env.
func waitWarm(t *testing.T, r *Runner, env []string) {
	t.Helper()
	a0 := filepath.Join(r.cfg.BinDir, "a0")
	var why string
	eventually(t, "the warm server to be ready", 2*time.Minute, func() bool {
		var srv *warmServer
		srv, why = r.warm.serverFor(a0, withBinDir(env, r.cfg.BinDir))
		return srv != nil
	})
	_ = why
}

func wrapper(script string) string { return "_F_EXEC_WRAPPER=sh -c '" + script + "' wrapper" }

func TestWarmStartSmoke(t *testing.T) {
	venv := sdkVenv(t)
	r := warmRunner(t, venv)
	a := newAttempt(t)
	p := start(t, r, Spec{Args: warmArgs, Env: warmEnv(venv, wrapper(`echo out; echo err >&2; pwd; echo $MARK; exit 3`), "MARK=hello"), Dir: a.dir, LogPath: a.log})
	st := p.Wait()
	b, _ := os.ReadFile(a.log)
	t.Logf("warm=%v status=%+v\n%s", p.Warm(), st, b)
	_ = strings.Contains
	_ = strconv.Itoa
	_ = syscall.Getpid
}
