package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/images"
)

// Images as root filesystems (images/rootfs.go), on a host where raw
// containers run in runc:
//
//   - a build of a spec with apt_packages or commands layers runs
//     images.RootfsScript (mmdebstrap) as root of a user namespace of its
//     own, whose ids are buildIDs (never root on the host); the manager
//     unpacks the tarball it leaves into the store (InstallRootfs);
//   - an attempt whose image is such a root filesystem runs its command
//     (the SDK's a0) in runc over an overlay of it, as its own user with no
//     capabilities and no new privileges, in the host's network namespace
//     (the manager's endpoints are on the host's loopback) and fresh pid,
//     mount, IPC and UTS namespaces, with its directory (its code, its
//     secrets' files, its HOME) bound at the same path, in a cgroup below
//     the attempt's (its limits).
//
// Elsewhere such a spec fails its build naming the layer, as before.

// buildIDCount is how many ids a root filesystem build's user namespace
// maps (the users Debian's packages use fit).
const buildIDCount = 65536

// buildIDs are the host ids of a root filesystem build's user namespace:
// the buildIDCount after the attempts' range.
func (d *Driver) buildIDs() (*process.IDRange, error) {
	first := uint64(config.DefaultRunAsFirstUID) + uint64(config.DefaultRunAsCount)
	if r := d.cfg.RunAs; r.Mode == config.RunAsRange {
		first = uint64(r.FirstUID) + uint64(r.Count)
	}
	if first+buildIDCount >= 1<<32-1 {
		return nil, fmt.Errorf("no room for an image build's %d ids after the attempts' uids (executor.local.runAs)", buildIDCount)
	}
	ids := &process.IDRange{First: uint32(first), Count: buildIDCount}
	if d.users.Separate() {
		ids.Group = d.users.Group() // the work and store directories are the attempts' group's
	}
	return ids, nil
}

// rootfsBuilds says why this host builds no root filesystem images (nil:
// it does).
func (d *Driver) rootfsBuilds() error {
	if rt := d.cfg.Containers.Runtime; rt == config.ContainerRuntimeOff || rt == config.ContainerRuntimeHost {
		return fmt.Errorf("images with apt packages or commands run in runc, and executor.local.containers.runtime is %s", rt)
	}
	if _, err := d.runtime(); err != nil {
		return err
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errors.New("images with apt packages or commands are built with mmdebstrap, which this host lacks (apt-get install mmdebstrap)")
	}
	return nil
}

// prepareRootfsBuild is prepareBuild for a spec that needs a root
// filesystem: b has the key and target; it returns the build's argv and
// environment.
func (d *Driver) prepareRootfsBuild(dir string, spec *ib.ImageSpec, tarball []byte, b *imageBuild) ([]string, contract.Env, error) {
	r, err := images.AnalyseRootfs(spec)
	if err != nil {
		return nil, contract.Env{}, err
	}
	b.plan, b.rootfs = r.Plan, r
	env := contract.Env{}.With(hostEnv()...)
	sh := func(script string) []string { return []string{"/bin/sh", "-c", script, images.TaskName} }
	if _, ok := d.envs.Ready(b.key); ok {
		return sh(images.ReadyScript(b.key)), env, nil
	}
	uv, err := d.uv()
	if err != nil {
		return nil, contract.Env{}, err
	}
	if b.ns, err = d.buildIDs(); err != nil {
		return nil, contract.Env{}, err
	}
	b.staging = d.envs.StagingDir(dir)
	fail := func(err error) ([]string, contract.Env, error) {
		_ = os.RemoveAll(b.staging)
		b.staging = ""
		return nil, contract.Env{}, err
	}
	if err := os.RemoveAll(b.staging); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(filepath.Join(b.staging, "home"), 0o700); err != nil {
		return fail(err)
	}
	ctxDir := ""
	if len(tarball) > 0 {
		ctxDir = filepath.Join(b.staging, contextDir)
		if err := images.Unpack(tarball, ctxDir); err != nil {
			return fail(err)
		}
	}
	// The staging directory is the namespace's root's: mmdebstrap writes
	// its temporary directory and the tarball there.
	if err := chownTree(b.staging, int(b.ns.First), int(b.ns.First)); err != nil {
		return fail(fmt.Errorf("the build's staging directory: %w", err))
	}
	ca := os.Getenv("SSL_CERT_FILE")
	if ca == "" {
		ca = "/etc/ssl/certs/ca-certificates.crt"
	}
	if _, err := os.Stat(ca); err != nil {
		ca = ""
	}
	env = env.With(contract.KV{Key: "HOME", Value: filepath.Join(b.staging, "home")})
	release, ok, err := d.envs.Claim(b.key, filepath.Join(dir, wakeFile))
	if err != nil {
		return fail(err)
	}
	if !ok {
		_ = os.RemoveAll(b.staging)
		b.staging, b.waited, b.ns = "", true, nil
		return sh(images.WaitScript(b.key, filepath.Join(dir, wakeFile))), env, nil
	}
	b.release = release
	return sh(images.RootfsScript(r, b.key, uv, ca, ctxDir, b.staging, "")), env, nil
}

// buildNS is the user namespace the attempt's process starts in (nil: the
// host's).
func (e *ownAttempt) buildNS() *process.IDRange {
	if e.build == nil {
		return nil
	}
	return e.build.ns
}

// rootfsImage returns the key of the root filesystem image l's task runs
// in (ok false: none).
func (d *Driver) rootfsImage(l *attempt.Launch) (key string, ok bool) {
	key, ok = images.KeyOf(l.Container().GetImage())
	if !ok || d.envs == nil {
		return "", false
	}
	m, ok := d.envs.Ready(key)
	return key, ok && m.Rootfs
}

// rootfsHome is the HOME of an attempt in a root filesystem image, in its
// directory.
const rootfsHome = "home"

// rootfsPath is the PATH of a process in a root filesystem image.
const rootfsPath = images.VenvDir + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// prepareRootfsRun lays out the bundle of an attempt whose image is the
// root filesystem key and returns the argv that runs args in it with env.
func (d *Driver) prepareRootfsRun(dir string, key string, args []string, env contract.Env, user runas.User) ([]string, string, error) {
	rt, err := d.runtime()
	if err != nil {
		return nil, "", fmt.Errorf("the image is a root filesystem, which runs in runc: %w", err)
	}
	lower := d.envs.RootfsDir(key)
	bundle, err := makeOverlayBundle(dir, lower)
	if err != nil {
		return nil, "", err
	}
	env = env.With(contract.KV{Key: "PATH", Value: rootfsPath}, contract.KV{Key: "VIRTUAL_ENV", Value: images.VenvDir})
	uid, gid := containerUser(user)
	cwd := filepath.Join(dir, cwdDir)
	// Its working directory is its user's, as an attempt's on the host
	// (the runner makes none for the process: it runs as root).
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		return nil, "", err
	}
	if err := os.Chown(cwd, int(uid), int(gid)); err != nil {
		return nil, "", err
	}
	// A HOME of its own: the manager's is not in the image (and would not
	// be its user's).
	home := filepath.Join(dir, rootfsHome)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, "", err
	}
	if err := os.Chown(home, int(uid), int(gid)); err != nil {
		return nil, "", err
	}
	env = env.With(contract.KV{Key: "HOME", Value: home})
	id := containerID(dir)
	spec := containerSpec(args, env.Environ(), cwd, uid, gid, [][2]string{{dir, dir}}, d.runner.ContainerCgroup(cwd, id))
	// The host's network: the manager's endpoint and its storage's are on
	// the host's loopback.
	spec.Linux.Namespaces = []ociNamespace{{Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}}
	for _, f := range []string{"/etc/resolv.conf", "/etc/hosts"} {
		if _, err := os.Stat(f); err == nil {
			spec.Mounts = append(spec.Mounts, ociMount{Destination: f, Type: "bind", Source: f,
				Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
		}
	}
	if err := writeBundle(bundle, spec); err != nil {
		return nil, "", err
	}
	note := fmt.Sprintf("image %s: a root filesystem, in runc as uid %d with the attempt's directory bound", key, uid)
	argv := []string{rt.unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", overlayScript, "runc",
		lower, filepath.Join(bundle, "upper"), filepath.Join(bundle, "work"), filepath.Join(bundle, "rootfs"),
		rt.runc, filepath.Join(dir, runcState), bundle, id}
	return argv, note, nil
}
