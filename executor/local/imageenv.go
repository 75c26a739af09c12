package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/gen/go/flyteidl2/core"
	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// Images as Python environments (package images). Two things happen here:
//
//   - the built-in build-image task (images.IsBuild) runs the build: the
//     manager reads the spec and the context, decides what a Python
//     environment can honour (a layer it cannot fails the attempt, named),
//     and starts the build's script as the attempt's process, as the
//     attempt's own user (a leased uid on a root manager, never root),
//     into a staging directory of that user's, with a uv cache of its own;
//     its output is the attempt's log. The manager holds the key's lock
//     while it builds (images.Store.Claim): a second build of the key
//     runs a process that says so in its log and waits for the first, and
//     answers with its environment. After the build exited, collectBuild
//     has the manager check the staged environment, make it its own and
//     read-only, and move it into the store (images.Store.Install), and
//     writes the output (the fqin) or error.pb naming the layer that
//     failed;
//   - an attempt of a task whose image is such an fqin runs with the
//     interpreter of that environment (imageEnv), started plainly (warm
//     start serves the manager's own environment only). Any other image
//     runs in the manager's environment, as before.

// imageBuild is what a build attempt needs after its process exited.
type imageBuild struct {
	plan    *images.Plan
	key     string
	target  string
	staging string // its staging directory ("" when it builds nothing)
	waited  bool   // it waited for another build of key
	release func() // the key's lock, held while it builds (nil: not held)
	// A root filesystem's build (rootfsimage.go): its plan, and the
	// user namespace its process starts in (nil when it builds nothing).
	rootfs *images.RootfsPlan
	ns     *process.IDRange
}

// contextDir is where a build's context is unpacked, in its staging
// directory (the build's user's, as is the context: a project's build may
// write into its source); wakeFile is created in the attempt's directory
// when the build it waits for ended.
const (
	contextDir = "build-context"
	wakeFile   = "build-wake"
)

// Images is the store of image environments (nil when
// executor.local.environments.dir is empty).
func (d *Driver) Images() *images.Store { return d.envs }

// prepareBuild returns the argv of a's build, the environment it runs with
// and what collectBuild needs; user is who it runs as. The error is the
// user's (bad inputs, a layer that cannot be honoured, no uv on this
// host), for the run's error. When it returns a build holding the key's
// lock, the attempt's end (dropEntry: finishBuild) releases it.
func (d *Driver) prepareBuild(ctx context.Context, a *store.Action, dir string, user runas.User) ([]string, contract.Env, *imageBuild, error) {
	if d.envs == nil {
		return nil, contract.Env{}, nil, errors.New("this manager builds no images: executor.local.environments.dir is not set")
	}
	in, err := d.buildInputs(ctx, a)
	if err != nil {
		return nil, contract.Env{}, nil, err
	}
	blobs := d.state.Blobs()
	read := func(name, uri string) ([]byte, error) {
		key, err := blobs.Key(uri)
		if err != nil {
			return nil, fmt.Errorf("input %s: %q is not in this manager's storage: %w", name, uri, err)
		}
		b, err := blobs.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("input %s: reading %s: %w", name, uri, err)
		}
		return b, nil
	}
	raw, err := read(images.InputSpec, in[images.InputSpec])
	if err != nil {
		return nil, contract.Env{}, nil, err
	}
	spec := &ib.ImageSpec{}
	if err := proto.Unmarshal(raw, spec); err != nil {
		return nil, contract.Env{}, nil, fmt.Errorf("input %s: not an ImageSpec: %v", images.InputSpec, err)
	}
	var tarball []byte
	if uri := in[images.InputContext]; uri != "" {
		if tarball, err = read(images.InputContext, uri); err != nil {
			return nil, contract.Env{}, nil, err
		}
	}
	key, err := images.Key(spec, images.ContextDigest(tarball))
	if err != nil {
		return nil, contract.Env{}, nil, err
	}
	var noRootfs error
	if images.NeedsRootfs(spec) {
		if noRootfs = d.rootfsBuilds(); noRootfs == nil {
			b := &imageBuild{key: key, target: in[images.InputTarget]}
			args, env, err := d.prepareRootfsBuild(dir, spec, tarball, b)
			if err != nil {
				return nil, contract.Env{}, nil, err
			}
			return args, env, b, nil
		}
	}
	plan, err := images.Analyse(spec)
	if err != nil {
		if noRootfs != nil {
			err = fmt.Errorf("%w (%v)", err, noRootfs)
		}
		return nil, contract.Env{}, nil, err
	}
	b := &imageBuild{plan: plan, key: key, target: in[images.InputTarget]}
	env := contract.Env{}.With(hostEnv()...)
	sh := func(script string) []string { return []string{"/bin/sh", "-c", script, images.TaskName} }
	if _, ok := d.envs.Ready(key); ok {
		return sh(images.ReadyScript(key)), env, b, nil
	}
	uv, err := d.uv()
	if err != nil {
		return nil, contract.Env{}, nil, err
	}
	python := plan.Python
	if v, bin := d.managerPython(); v == plan.Python {
		python = bin // the manager's own interpreter: attempts can reach it
	}
	// The build's own directory, its user's alone: the context is
	// unpacked there too, for it to read.
	b.staging = d.envs.StagingDir(dir)
	if err := os.RemoveAll(b.staging); err != nil {
		return nil, contract.Env{}, nil, err
	}
	if err := os.MkdirAll(b.staging, 0o700); err != nil {
		return nil, contract.Env{}, nil, err
	}
	ctxDir := ""
	if len(tarball) > 0 {
		ctxDir = filepath.Join(b.staging, contextDir)
		if err := images.Unpack(tarball, ctxDir); err != nil {
			_ = os.RemoveAll(b.staging)
			return nil, contract.Env{}, nil, err
		}
	}
	if err := giveTree(ctxDir, user); err != nil {
		_ = os.RemoveAll(b.staging)
		return nil, contract.Env{}, nil, fmt.Errorf("the build's context: %w", err)
	}
	if err := process.GiveDir(b.staging, user); err != nil {
		_ = os.RemoveAll(b.staging)
		return nil, contract.Env{}, nil, fmt.Errorf("the build's staging directory: %w", err)
	}
	for k, v := range images.StagingEnv(b.staging) {
		env = env.With(contract.KV{Key: k, Value: v})
	}
	if user.Other() {
		// A Python uv would download goes to the build's HOME, which is
		// removed after the build: only interpreters of the host.
		env = env.With(contract.KV{Key: "UV_PYTHON_DOWNLOADS", Value: "never"})
	}
	// Last, as nothing can fail after it: the key's lock.
	release, ok, err := d.envs.Claim(key, filepath.Join(dir, wakeFile))
	if err != nil {
		_ = os.RemoveAll(b.staging)
		return nil, contract.Env{}, nil, err
	}
	if !ok {
		_ = os.RemoveAll(b.staging)
		b.staging, b.waited = "", true
		return sh(images.WaitScript(key, filepath.Join(dir, wakeFile))), env, b, nil
	}
	b.release = release
	return sh(d.envs.Script(plan, key, uv, python, ctxDir, b.staging)), env, b, nil
}

// buildInputs reads a build attempt's string inputs.
func (d *Driver) buildInputs(ctx context.Context, a *store.Action) (map[string]string, error) {
	uri, err := d.state.InputsFile(a)
	if err != nil {
		return nil, err
	}
	blobs := d.state.Blobs()
	key, err := blobs.Key(uri)
	if err != nil {
		return nil, err
	}
	b, err := blobs.Get(ctx, key)
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		return nil, err
	}
	inputs := &task.Inputs{}
	if err := proto.Unmarshal(b, inputs); err != nil {
		return nil, fmt.Errorf("the inputs are unreadable: %v", err)
	}
	out := map[string]string{}
	for _, l := range inputs.GetLiterals() {
		out[l.GetName()] = l.GetValue().GetScalar().GetPrimitive().GetStringValue()
	}
	if out[images.InputSpec] == "" {
		return nil, fmt.Errorf("input %s (the uploaded ImageSpec) is required", images.InputSpec)
	}
	if out[images.InputTarget] == "" {
		return nil, fmt.Errorf("input %s (the image's name:tag) is required", images.InputTarget)
	}
	return out, nil
}

// uv finds the uv binary: configured, beside the manager's Python, or on
// the PATH.
func (d *Driver) uv() (string, error) {
	if p := d.cfg.Environments.UV; p != "" {
		return p, nil
	}
	if d.cfg.Python != "" {
		p := filepath.Join(d.cfg.Python, "uv")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath("uv")
	if err != nil {
		return "", errors.New("images are built with uv, which this host lacks: install it (pip install uv, or the Debian package) " +
			"beside the manager's Python or on its PATH, or set executor.local.environments.uv")
	}
	return p, nil
}

// managerPython returns the version (MAJOR.MINOR) and path of the
// manager's own interpreter, found once ("" when unknown).
func (d *Driver) managerPython() (version, path string) {
	d.pyOnce.Do(func() {
		if d.cfg.Python == "" {
			return
		}
		p := filepath.Join(d.cfg.Python, "python")
		out, err := exec.Command(p, "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output()
		if err == nil {
			d.pyVersion, d.pyPath = strings.TrimSpace(string(out)), p
		}
	})
	return d.pyVersion, d.pyPath
}

// collectBuild records how a build ended, after its process exited, as a
// task would: outputs.pb with the fqin, or error.pb naming the layer that
// failed. An aborted or timed-out build leaves nothing: its exit says it.
// A build that succeeded has its environment installed into the store by
// the manager (images.Store.Install) first.
func (d *Driver) collectBuild(ctx context.Context, e *ownAttempt, st process.ExitStatus) error {
	b := e.build
	defer d.finishBuild(e) // the staging directory, the lock: waiters go on
	if st.Signal != "" || st.TimedOut || st.Aborted {
		return nil
	}
	if st.Code != 0 {
		msg := fmt.Sprintf("image build failed: its script exited with code %d; the attempt's log says why", st.Code)
		le := b.plan.FailedLayer(st.Code)
		if b.rootfs != nil {
			le = b.rootfs.FailedLayer(st.Code)
		}
		if le != nil {
			msg = le.Error()
		}
		return d.writeResult(ctx, e, runlayout.ErrorFile, buildError(msg))
	}
	reused := b.staging == ""
	if b.staging != "" {
		uid, gid := uint32(os.Getuid()), -1
		if e.user.Other() {
			uid, gid = e.user.UID, int(d.users.Group())
		}
		var err error
		if b.rootfs != nil {
			reused, err = d.envs.InstallRootfs(b.staging, b.key, b.target, b.rootfs)
		} else {
			reused, err = d.envs.Install(b.staging, uid, gid, b.key, b.target, b.plan)
		}
		if err != nil {
			d.log.Warn("image build rejected", "image", b.target, "run", e.key.RunName, "err", err)
			return d.writeResult(ctx, e, runlayout.ErrorFile, buildError("image build failed after its last layer: "+err.Error()))
		}
	} else if _, ok := d.envs.Ready(b.key); !ok && b.waited {
		return d.writeResult(ctx, e, runlayout.ErrorFile, buildError(
			"image build failed: another build of this image ran at the same time and did not finish it (its run's error says why); run again"))
	}
	m, err := d.envs.Built(b.key, b.target, images.BuildRun{Org: e.key.Org, Project: e.key.Project, Domain: e.key.Domain, Name: e.key.RunName})
	if err != nil {
		return d.writeResult(ctx, e, runlayout.ErrorFile, buildError("image build failed after its last layer: "+err.Error()))
	}
	if reused {
		d.log.Info("image environment reused: another build of the same image made it", "image", b.target, "fqin", m.FQIN, "run", e.key.RunName)
	} else {
		d.log.Info("image environment built", "image", b.target, "fqin", m.FQIN, "bytes", m.Bytes, "run", e.key.RunName)
	}
	out, _ := proto.Marshal(&task.Outputs{Literals: []*task.NamedLiteral{{Name: images.OutputFQIN, Value: &core.Literal{
		Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{
			Value: &core.Primitive_StringValue{StringValue: m.FQIN}}}}}}}}})
	return d.writeResult(ctx, e, runlayout.OutputsFile, out)
}

// finishBuild removes a build's staging directory and releases its key's
// lock, once its process ended or never started (also from dropEntry: a
// build whose end is not collected, aborted or failing to start).
// Idempotent.
func (d *Driver) finishBuild(e *ownAttempt) {
	d.mu.Lock()
	b := e.build
	running := e.proc != nil && e.status == nil
	d.mu.Unlock()
	if b == nil || running {
		return
	}
	if b.staging != "" {
		if err := os.RemoveAll(b.staging); err != nil {
			d.log.Warn("removing an image build's staging directory", "dir", b.staging, "err", err)
		}
	}
	if b.release != nil {
		b.release()
	}
}

// giveTree makes dir and everything under it (the manager made them:
// directories and files, no links) u's ("" or the manager's user:
// nothing to do).
func giveTree(dir string, u runas.User) error {
	if dir == "" || !u.Other() {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(u.UID), int(u.GID))
	})
}

func buildError(msg string) []byte {
	b, _ := proto.Marshal(&core.ErrorDocument{Error: &core.ContainerError{
		Code: "ImageBuildFailed", Message: msg, Kind: core.ContainerError_NON_RECOVERABLE, Origin: core.ExecutionError_USER}})
	return b
}

// writeResult writes name (outputs.pb, error.pb) into the attempt's output
// prefix: a directory for local storage, else the blob store.
func (d *Driver) writeResult(ctx context.Context, e *ownAttempt, name string, data []byte) error {
	if filepath.IsAbs(e.outDir) {
		return os.WriteFile(filepath.Join(e.outDir, name), data, 0o644)
	}
	key, err := d.state.Blobs().Key(e.outDir)
	if err != nil {
		return err
	}
	return d.state.Blobs().Put(ctx, key+"/"+name, data, nil)
}

// imageEnv returns the bin directory and environment of the image
// environment l's task runs in ("" for the manager's own), marking it in
// use until release. An fqin of this manager whose environment is not here
// is the user's error: it was collected, or built by another manager.
func (d *Driver) imageEnv(l *attempt.Launch, env contract.Env) (bin string, out contract.Env, release func(), err error) {
	image := l.Container().GetImage()
	key, ok := images.KeyOf(image)
	if !ok || d.envs == nil {
		return "", env, func() {}, nil
	}
	m, release, err := d.envs.Use(key)
	if err != nil {
		return "", env, nil, fmt.Errorf("the image %s is not built on this host (its environment was removed to keep the cache under "+
			"executor.local.environments.maxBytes, or another manager built it): run the task again from the SDK, which builds it again", image)
	}
	for _, k := range sortedKeys(m.Env) {
		if k == "PATH" || k == "VIRTUAL_ENV" {
			continue // the environment's own come below
		}
		v := os.Expand(m.Env[k], func(name string) string { s, _ := env.Get(name); return s })
		env = env.With(contract.KV{Key: k, Value: v})
	}
	if m.Rootfs {
		return "", env, release, nil // it runs in runc: rootfsimage.go
	}
	dir := d.envs.EnvDir(key)
	env = env.With(contract.KV{Key: "VIRTUAL_ENV", Value: dir})
	return filepath.Join(dir, "bin"), env, release, nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// envState is the driver's part of the image environments.
type envState struct {
	envs      *images.Store
	pyOnce    sync.Once
	pyVersion string
	pyPath    string
}

// hostEnv is the manager's own environment, which a build runs with (uv
// reads its index settings from there; its cache and HOME are the
// build's own: images.StagingEnv).
func hostEnv() []contract.KV {
	var kvs []contract.KV
	for _, s := range os.Environ() {
		if k, v, ok := strings.Cut(s, "="); ok && k != "" {
			kvs = append(kvs, contract.KV{Key: k, Value: v})
		}
	}
	// Copies, not hard links into uv's cache: a copy takes the group of
	// the environments' directory, which attempts of other users read by.
	return append(kvs, contract.KV{Key: "UV_NO_PROGRESS", Value: "1"}, contract.KV{Key: "UV_LINK_MODE", Value: "copy"})
}
