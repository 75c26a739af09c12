package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/images"
	"fmgr.dev/executor/local/runas"
)

// The runc runtime of raw containers: each attempt is an OCI container
// whose root filesystem is an overlay of the task's image (unpacked once in
// the image store, the read-only lower layer) and a writable layer in the
// attempt's directory. Its command runs as an unprivileged user
// (containerUser) with no capabilities and no new privileges, in fresh
// pid, mount, network (loopback only), IPC and UTS namespaces, in a cgroup
// below the attempt's own (so the task's limits apply). Its data
// directories are bind mounts of the attempt's own data/inputs and
// data/outputs; their mount points, and any path the task chose, are made
// inside the container's root, never on the host.
//
// Bundle layout in the attempt's directory:
//
//	bundle/config.json     the OCI configuration (bundle.go)
//	bundle/rootfs/         the overlay's mount point
//	bundle/upper, work/    the overlay's writable layer and its work dir
//	runc/                  runc's state (--root): the container while it runs
//
// The attempt's process is `unshare --mount` running a shell that mounts
// the overlay in that private mount namespace (so it vanishes with the
// container, whatever happens to the manager) and becomes `runc run`, whose
// output is the attempt's log. runc forwards the attempt's stop signal to
// the container; whatever is left when runc ends (runc killed after the
// grace) is killed by `runc delete --force` before the attempt's end is
// recorded (stopContainers), also for an attempt a restarted manager finds.

// containerUser is the user and group a raw container's command runs as:
// the attempt's own (runas), or nobody when attempts run as the manager's
// user, which for runc is root.
func containerUser(u runas.User) (uid, gid uint32) {
	if u.Other() {
		return u.UID, u.GID
	}
	return 65534, 65534
}

const (
	bundleDir   = "bundle"
	runcState   = "runc"
	runcTimeout = 30 * time.Second
)

// overlayScript, run by sh in a private mount namespace: mount the overlay
// ($1 lower, $2 upper, $3 work) at $4, then become runc ($5, state in $6)
// running bundle $7 as container $8. The umask is the usual one, not the
// manager's private one, for the mount points runc makes in the container
// (a task's /a/b/outputs: the container's user must be able to enter /a/b).
const overlayScript = `umask 022 && mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" && exec "$5" --root "$6" run --bundle "$7" "$8"`

// runcRuntime is what the runc runtime needs, found once.
type runcRuntime struct {
	once    sync.Once
	runc    string
	unshare string
	store   *images.Store
	err     error // why raw containers cannot run here
}

// runtime finds runc, unshare and the image store the first time a raw
// container runs; the error says what is missing and how to fix it.
func (d *Driver) runtime() (*runcRuntime, error) {
	rt := &d.runc
	rt.once.Do(func() {
		rt.err = func() error {
			const fix = "; or set executor.local.containers.runtime: host to run the command on the host (unsafe), or use the kubernetes executor"
			if os.Geteuid() != 0 {
				return errors.New("raw container tasks run in runc, which needs the manager to run as root" + fix)
			}
			bin := d.cfg.Containers.Runc
			if bin == "" {
				bin = "runc"
			}
			p, err := exec.LookPath(bin)
			if err != nil {
				return fmt.Errorf("raw container tasks run in runc, and %s was not found (install it: apt-get install runc, or set executor.local.containers.runc)%s", bin, fix)
			}
			if out, err := exec.Command(p, "--version").CombinedOutput(); err != nil {
				return fmt.Errorf("raw container tasks run in runc, and `%s --version` failed: %v: %s%s", p, err, strings.TrimSpace(string(out)), fix)
			}
			if rt.unshare, err = exec.LookPath("unshare"); err != nil {
				return errors.New("raw container tasks need util-linux's unshare and mount on the host" + fix)
			}
			if _, err := exec.LookPath("mount"); err != nil {
				return errors.New("raw container tasks need util-linux's unshare and mount on the host" + fix)
			}
			rt.runc = p
			if rt.store, err = images.Open(d.cfg.Containers.Images); err != nil {
				return fmt.Errorf("opening the image store: %w", err)
			}
			return nil
		}()
		if rt.err != nil {
			d.log.Warn("raw container tasks cannot run", "reason", rt.err)
		}
	})
	return rt, rt.err
}

// containerID names the container of the attempt in dir.
func containerID(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return "fm-" + hex.EncodeToString(sum[:10])
}

// prepareRunc lays out the attempt's bundle and returns the argv that runs
// its container. Errors are the task's (an image this host lacks, a data
// directory the container cannot have) or the host's, in words.
func (d *Driver) prepareRunc(ctx context.Context, dir string, l *attempt.Launch, user runas.User) ([]string, string, error) {
	rt, err := d.runtime()
	if err != nil {
		return nil, "", err
	}
	job := l.Raw
	// The storage's keys are no concern of the container: the manager
	// moves its data in and out (rawcontainer.go), so they stay out of it.
	if slices.ContainsFunc(l.Secrets, func(s contract.Secret) bool { return !attempt.IsStorageSecret(s) }) {
		return nil, "", errors.New("the runc runtime does not deliver secrets to raw containers yet: run the task without secrets, or use the kubernetes executor")
	}
	for _, p := range []string{job.InputDir, job.OutputDir} {
		if reserved(p) {
			return nil, "", fmt.Errorf("the data directory %s cannot be used in a container: /proc, /sys and /dev belong to the runtime", p)
		}
	}
	im, err := rt.store.Resolve(job.Image)
	if err != nil {
		return nil, "", err
	}
	lower, err := rt.store.Rootfs(im)
	if err != nil {
		return nil, "", fmt.Errorf("preparing the image %s: %w", im.Ref, err)
	}
	bundle, err := makeOverlayBundle(dir, lower)
	if err != nil {
		return nil, "", err
	}
	in, out := rawDirs(dir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, "", err
	}
	// A file input that names a path on this host (File.from_local under
	// a file:// raw-data path) is copied only from the tasks' own
	// directories: the container does not have the host's files.
	job.HostFiles, job.HostRoot = true, d.cfg.WorkDir
	if err := job.Download(ctx, d.state.Blobs(), in); err != nil {
		return nil, "", fmt.Errorf("could not materialise the inputs: %w", err)
	}
	uid, gid := containerUser(user)
	if err := chownTree(filepath.Join(dir, rawDataDir), int(uid), int(gid)); err != nil {
		return nil, "", err
	}
	args := l.Args
	if len(args) == 0 {
		args = append(append([]string(nil), im.Config.Entrypoint...), im.Config.Cmd...)
	}
	if len(args) == 0 {
		return nil, "", fmt.Errorf("the task has no command and the image %s none either", im.Ref)
	}
	env := append([]string(nil), im.Config.Env...)
	for _, kv := range l.Container().GetEnv() {
		env = append(env, kv.GetKey()+"="+kv.GetValue())
	}
	cwd := im.Config.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	id := containerID(dir)
	spec := containerSpec(args, env, cwd, uid, gid, [][2]string{{job.InputDir, in}, {job.OutputDir, out}},
		d.runner.ContainerCgroup(filepath.Join(dir, cwdDir), id))
	if err := writeBundle(bundle, spec); err != nil {
		return nil, "", err
	}
	note := fmt.Sprintf("raw container: image %s (%s) in runc as uid %d, with %s and %s bound to the attempt's own directories",
		im.Ref, im.Digest, uid, job.InputDir, job.OutputDir)
	argv := []string{rt.unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", overlayScript, "runc",
		lower, filepath.Join(bundle, "upper"), filepath.Join(bundle, "work"), filepath.Join(bundle, "rootfs"),
		rt.runc, filepath.Join(dir, runcState), bundle, id}
	return argv, note, nil
}

// reserved says whether a container path belongs to the runtime.
func reserved(p string) bool {
	p = path.Clean(p)
	for _, r := range []string{"/proc", "/sys", "/dev"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// chownTree gives dir and everything in it to uid:gid (symbolic links
// themselves, never what they point to).
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// stopContainers kills and deletes whatever container of the attempt in
// dir runc still knows (runc ended without cleaning up: it was killed, or
// the manager died). It returns how many there were.
func (d *Driver) stopContainers(dir string) int {
	state := filepath.Join(dir, runcState)
	entries, err := os.ReadDir(state)
	if err != nil || len(entries) == 0 {
		return 0
	}
	bin := d.runc.runc
	if bin == "" {
		if bin, err = exec.LookPath(orDefault(d.cfg.Containers.Runc, "runc")); err != nil {
			d.log.Warn("a container may be left running: runc not found", "dir", dir)
			return 0
		}
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), runcTimeout)
		out, err := exec.CommandContext(ctx, bin, "--root", state, "delete", "--force", e.Name()).CombinedOutput()
		cancel()
		if err != nil {
			d.log.Warn("deleting a container", "container", e.Name(), "err", err, "output", strings.TrimSpace(string(out)))
			continue
		}
		n++
	}
	return n
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// removeContainer stops what is left of the attempt's container in dir
// and removes its bundle (its writable layer: the outputs were in data/).
func (d *Driver) removeContainer(dir string) int {
	n := d.stopContainers(dir)
	_ = os.RemoveAll(filepath.Join(dir, bundleDir))
	_ = os.RemoveAll(filepath.Join(dir, runcState))
	return n
}

// makeOverlayBundle makes the attempt's bundle directory (dir/bundle) with
// the overlay's mount point and writable layer over lower, and returns it.
func makeOverlayBundle(dir, lower string) (string, error) {
	bundle := filepath.Join(dir, bundleDir)
	for _, p := range []string{lower, bundle} {
		if strings.ContainsAny(p, ",:\\\"") {
			return "", fmt.Errorf("the path %s cannot be an overlay layer (it has a comma, colon, quote or backslash)", p)
		}
	}
	for _, sub := range []string{"rootfs", "upper", "work"} {
		if err := os.MkdirAll(filepath.Join(bundle, sub), 0o755); err != nil {
			return "", err
		}
	}
	// The container's / is the upper layer's directory: whatever the
	// manager's umask, its user must be able to enter it.
	if err := os.Chmod(filepath.Join(bundle, "upper"), 0o755); err != nil {
		return "", err
	}
	return bundle, nil
}
