package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

// Raw container tasks (package copilot) run as the runtime configured in
// executor.local.containers.runtime says:
//
//   - runc (the default): an OCI container in runc, with the image's
//     filesystem (runc.go);
//   - host: the command on the host as the manager's user, in a private
//     mount namespace where the task's input and output directories are
//     bind mounts of the attempt's own; the image is not used. Unsafe: the
//     command can do whatever the manager can. The mount points must exist
//     on the host (they are never created there);
//   - off: raw container tasks fail at launch.

// rawDataDir holds the attempt's data directories of a raw container:
// inputs/ (materialised before the command starts) and outputs/ (collected
// after it exits).
const rawDataDir = "data"

func rawDirs(dir string) (in, out string) {
	return filepath.Join(dir, rawDataDir, "inputs"), filepath.Join(dir, rawDataDir, "outputs")
}

// bindScript, run by sh in the new mount namespace, binds $1 at $2 and $3
// at $4, then becomes the task's command.
const bindScript = `mount --bind "$1" "$2" && mount --bind "$3" "$4" && shift 4 && exec "$@"`

// prepareRaw prepares a raw container attempt in its directory as the
// configured runtime runs it, and returns its argv and a note for the
// action's events (reason, message). The error says what the host lacks or
// what the task asks that cannot be done.
func (d *Driver) prepareRaw(ctx context.Context, dir string, l *attempt.Launch, user runas.User) (args []string, reason, note string, err error) {
	switch d.cfg.Containers.Runtime {
	case config.ContainerRuntimeHost:
		args, note, err = d.prepareHost(ctx, dir, l)
		reason = "ImageNotUsed"
	case config.ContainerRuntimeOff:
		err = errors.New("raw container tasks are turned off on this manager (executor.local.containers.runtime: off)")
	default:
		args, note, err = d.prepareRunc(ctx, dir, l, user)
		reason = "Container"
	}
	if err == nil {
		err = process.AppendSystemLine(filepath.Join(dir, logFile), note)
	}
	return args, reason, note, err
}

// prepareHost materialises a raw container's inputs in the attempt's
// directory and returns the argv that runs its command on the host with
// the data directories bound, and a note saying the image is not used.
func (d *Driver) prepareHost(ctx context.Context, dir string, l *attempt.Launch) ([]string, string, error) {
	job := l.Raw
	if os.Geteuid() != 0 {
		return nil, "", errors.New("raw container tasks on the host need a private mount namespace, which only root can make: run the manager as root, or use the kubernetes executor")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, "", errors.New("raw container tasks need util-linux's unshare and mount on the host: " + err.Error())
	}
	if _, err := exec.LookPath("mount"); err != nil {
		return nil, "", errors.New("raw container tasks need util-linux's unshare and mount on the host: " + err.Error())
	}
	// The mount points: a bind mount needs its target to exist, and the
	// task chose these paths, so they are never made on the host.
	for _, p := range []string{job.InputDir, job.OutputDir} {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return nil, "", fmt.Errorf("the data directory %s is not a directory on this host, and the host runtime never creates a path a task chose "+
				"(create it, or use the runc runtime)", p)
		}
	}
	// The command runs on this host with its filesystem: inputs that
	// name a host path (File.from_local under a file:// raw-data path)
	// are copied from there.
	job.HostFiles = true
	in, out := rawDirs(dir)
	if err := os.MkdirAll(out, 0o777); err != nil {
		return nil, "", err
	}
	if err := job.Download(ctx, d.state.Blobs(), in); err != nil {
		return nil, "", fmt.Errorf("could not materialise the inputs: %w", err)
	}
	note := fmt.Sprintf("raw container: the image %q is not used by the local executor; the command runs on the host's filesystem "+
		"with %s and %s bound to the attempt's own directories", job.Image, job.InputDir, job.OutputDir)
	d.log.Warn("raw container runs on the host without its image", "action", l.Action.ActionKey.String(), "attempt", l.Attempt,
		"image", job.Image, "runtime", d.cfg.Containers.Runtime)
	args := []string{unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", bindScript, "copilot",
		in, job.InputDir, out, job.OutputDir}
	return append(args, l.Args...), note, nil
}

// collectRaw records a raw container's outputs after its command exited 0
// (outputs.pb, or error.pb saying which output is missing or wrong), so the
// attempt is classified like any other. Its data directories go then: the
// outputs are in storage.
func (d *Driver) collectRaw(ctx context.Context, e *ownAttempt, st process.ExitStatus) error {
	job := e.launch.Raw
	if st.Code != 0 || st.Signal != "" || st.TimedOut || st.Aborted {
		// The exit is the result: no outputs to look for.
		_ = os.RemoveAll(filepath.Join(e.dir, rawDataDir))
		return nil
	}
	_, out := rawDirs(e.dir)
	if err := job.Collect(ctx, d.state.Blobs(), out, e.outDir); err != nil {
		return fmt.Errorf("collecting the outputs of %s attempt %d: %w", e.key, e.n, err)
	}
	_ = os.RemoveAll(filepath.Join(e.dir, rawDataDir))
	return nil
}

// reportRaw records the note of prepareRaw in the action's events, where
// the SDK and the UI show it, and returns the action as written (a as it
// was when that failed: the note is also in the attempt's log).
func (d *Driver) reportRaw(ctx context.Context, a *store.Action, reason, note string) *store.Action {
	typ := workflow.ClusterEvent_TYPE_NORMAL
	if reason == "ImageNotUsed" {
		typ = workflow.ClusterEvent_TYPE_WARNING
	}
	updated, err := d.core.ReportClusterEvents(ctx, a, []*workflow.ClusterEvent{{
		OccurredAt: timestamppb.Now(), Message: note, Reason: reason, Type: typ}})
	if err != nil {
		d.log.Warn("recording a raw container's note", "action", a.ActionKey.String(), "err", err)
		return a
	}
	return updated
}
