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
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/store"
)

// Raw container tasks (package copilot) run here on the host, in a private
// mount namespace: the task's input and output directories (/var/inputs
// and /var/outputs by default) are bind mounts of the attempt's own
// directories, visible to the command alone, so the host's directories of
// those names stay as they are and concurrent attempts never see each
// other's data. No container runtime runs images on this kind of host
// (podman cannot: no registry, and its OCI runtime is refused the rlimits
// it sets), so the declared image is not used, and the attempt's log and
// the manager's log say so.

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

// prepareRaw materialises a raw container's inputs in the attempt's
// directory and returns the argv that runs its command with the data
// directories bound, and a note saying the image is not used. The error
// says what the host lacks, or what could not be materialised.
func (d *Driver) prepareRaw(ctx context.Context, dir string, l *attempt.Launch) ([]string, string, error) {
	job := l.Raw
	if os.Geteuid() != 0 {
		return nil, "", errors.New("raw container tasks need a private mount namespace, which only root can make: run the manager as root, or use the kubernetes executor")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, "", errors.New("raw container tasks need util-linux's unshare and mount on the host: " + err.Error())
	}
	if _, err := exec.LookPath("mount"); err != nil {
		return nil, "", errors.New("raw container tasks need util-linux's unshare and mount on the host: " + err.Error())
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
	// The mount points: a bind mount needs its target to exist. Only the
	// empty directory is ever made on the host; what the command writes
	// lands in the attempt's directory.
	for _, p := range []string{job.InputDir, job.OutputDir} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, "", fmt.Errorf("could not create the mount point %s: %w", p, err)
		}
	}
	note := fmt.Sprintf("raw container: the image %q is not used by the local executor; the command runs on the host's filesystem "+
		"with %s and %s bound to the attempt's own directories", job.Image, job.InputDir, job.OutputDir)
	d.log.Warn("raw container runs without its image", "action", l.Action.ActionKey.String(), "attempt", l.Attempt,
		"image", job.Image, "runtime", d.cfg.Containers.Runtime)
	if err := process.AppendSystemLine(filepath.Join(dir, logFile), note); err != nil {
		return nil, "", err
	}
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
func (d *Driver) reportRaw(ctx context.Context, a *store.Action, note string) *store.Action {
	updated, err := d.core.ReportClusterEvents(ctx, a, []*workflow.ClusterEvent{{
		OccurredAt: timestamppb.Now(), Message: note, Reason: "ImageNotUsed", Type: workflow.ClusterEvent_TYPE_WARNING}})
	if err != nil {
		d.log.Warn("recording a raw container's note", "action", a.ActionKey.String(), "err", err)
		return a
	}
	return updated
}
