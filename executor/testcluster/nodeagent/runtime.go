package nodeagent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The node has no images: a Flyte task's Pod runs `a0`, the SDK's task
// runtime, from the PATH the agent gives its processes. Without the SDK's
// virtualenv on that PATH every task fails to start, so the agent says at
// start which Python will run tasks, or that none will.

// TaskRuntime describes what the command `a0` of a task's Pod resolves to
// on the PATH of env (the agent's default environment when env is empty):
// the script, the interpreter it runs with, and the versions of Python and
// of the flyte SDK there; or, when there is no a0, that tasks cannot start
// and how to fix it. ok is false in that case.
func TaskRuntime(ctx context.Context, env []string) (desc string, ok bool) {
	if len(env) == 0 {
		env = agentEnv()
	}
	path := envMap(env)["PATH"]
	a0 := ""
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue // as the agent's processes look commands up
		}
		cand := filepath.Join(dir, "a0")
		if fi, err := os.Stat(cand); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			a0 = cand
			break
		}
	}
	if a0 == "" {
		return fmt.Sprintf("no `a0` (the flyte SDK's task runtime) on the node agent's PATH (%s): every Flyte task's Pod will fail "+
			"to start (exec: \"a0\": executable file not found in $PATH). Start the cluster with a virtualenv that has the "+
			"flyte SDK first on PATH, e.g. PATH=$PWD/.venv/bin:$PATH (`make venv` makes .venv)", path), false
	}
	python := interpreter(a0)
	if python == "" {
		return fmt.Sprintf("tasks run %s (not a Python script: its interpreter is unknown)", a0), true
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", "import sys, importlib.metadata as m; print(sys.version.split()[0], m.version('flyte'))")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return fmt.Sprintf("tasks run %s with %s, which cannot report its flyte SDK (%v): tasks will likely fail", a0, python, err), true
	}
	var pyVersion, flyteVersion string
	if _, err := fmt.Sscan(string(out), &pyVersion, &flyteVersion); err != nil {
		return fmt.Sprintf("tasks run %s with %s, which reports %q for its Python and flyte SDK", a0, python, out), true
	}
	return fmt.Sprintf("tasks run %s with %s (Python %s, flyte %s)", a0, python, pyVersion, flyteVersion), true
}

// interpreter is the program the #! line of script names, "" when it has
// none.
func interpreter(script string) string {
	f, err := os.Open(script)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		return ""
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return ""
	}
	// `#!/usr/bin/env python3` names the program through env.
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		if p, err := exec.LookPath(fields[1]); err == nil {
			return p
		}
		return fields[1]
	}
	return fields[0]
}
