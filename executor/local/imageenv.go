package local

import (
	"context"
	"errors"
	"fmt"
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
//     manager's own user; its output is the attempt's log. After it
//     exited, collectBuild records the environment and writes the output
//     (the fqin) or error.pb naming the layer that failed;
//   - an attempt of a task whose image is such an fqin runs with the
//     interpreter of that environment (imageEnv), started plainly (warm
//     start serves the manager's own environment only). Any other image
//     runs in the manager's environment, as before.

// imageBuild is what a build attempt needs after its process exited.
type imageBuild struct {
	plan   *images.Plan
	key    string
	target string
}

// contextDir is where a build's context is unpacked, in its attempt's
// directory; reusedFile is there when the build found its environment
// built by another.
const (
	contextDir = "build-context"
	reusedFile = "build-reused"
)

// Images is the store of image environments (nil when
// executor.local.environments.dir is empty).
func (d *Driver) Images() *images.Store { return d.envs }

// prepareBuild returns the argv of a's build and what collectBuild needs.
// The error is the user's (bad inputs, a layer that cannot be honoured,
// no uv on this host), for the run's error.
func (d *Driver) prepareBuild(ctx context.Context, a *store.Action, dir string) ([]string, *imageBuild, error) {
	if d.envs == nil {
		return nil, nil, errors.New("this manager builds no images: executor.local.environments.dir is not set")
	}
	in, err := d.buildInputs(ctx, a)
	if err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	spec := &ib.ImageSpec{}
	if err := proto.Unmarshal(raw, spec); err != nil {
		return nil, nil, fmt.Errorf("input %s: not an ImageSpec: %v", images.InputSpec, err)
	}
	var tarball []byte
	if uri := in[images.InputContext]; uri != "" {
		if tarball, err = read(images.InputContext, uri); err != nil {
			return nil, nil, err
		}
	}
	plan, err := images.Analyse(spec)
	if err != nil {
		return nil, nil, err
	}
	key, err := images.Key(spec, images.ContextDigest(tarball))
	if err != nil {
		return nil, nil, err
	}
	ctxDir := ""
	if len(tarball) > 0 {
		ctxDir = filepath.Join(dir, contextDir)
		if err := images.Unpack(tarball, ctxDir); err != nil {
			return nil, nil, err
		}
	}
	uv, err := d.uv()
	if err != nil {
		return nil, nil, err
	}
	python := plan.Python
	if v, bin := d.managerPython(); v == plan.Python {
		python = bin // the manager's own interpreter: attempts can reach it
	}
	script := d.envs.Script(plan, key, uv, python, ctxDir, filepath.Join(dir, reusedFile))
	return []string{"/bin/sh", "-c", script, images.TaskName},
		&imageBuild{plan: plan, key: key, target: in[images.InputTarget]}, nil
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
func (d *Driver) collectBuild(ctx context.Context, e *ownAttempt, st process.ExitStatus) error {
	b := e.build
	if st.Signal != "" || st.TimedOut || st.Aborted {
		return nil
	}
	if st.Code != 0 {
		msg := fmt.Sprintf("image build failed: its script exited with code %d; the attempt's log says why", st.Code)
		if le := b.plan.FailedLayer(st.Code); le != nil {
			msg = le.Error()
		}
		return d.writeResult(ctx, e, runlayout.ErrorFile, buildError(msg))
	}
	m, err := d.envs.Built(b.key, b.target, b.plan, images.BuildRun{Org: e.key.Org, Project: e.key.Project, Domain: e.key.Domain, Name: e.key.RunName})
	if err != nil {
		return d.writeResult(ctx, e, runlayout.ErrorFile, buildError("image build failed after its last layer: "+err.Error()))
	}
	if _, err := os.Stat(filepath.Join(e.dir, reusedFile)); err == nil {
		d.log.Info("image environment reused: another build of the same image made it", "image", b.target, "fqin", m.FQIN, "run", e.key.RunName)
	} else {
		d.log.Info("image environment built", "image", b.target, "fqin", m.FQIN, "bytes", m.Bytes, "run", e.key.RunName)
	}
	out, _ := proto.Marshal(&task.Outputs{Literals: []*task.NamedLiteral{{Name: images.OutputFQIN, Value: &core.Literal{
		Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{
			Value: &core.Primitive_StringValue{StringValue: m.FQIN}}}}}}}}})
	return d.writeResult(ctx, e, runlayout.OutputsFile, out)
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
// reads its cache and index settings from there: UV_CACHE_DIR, ...).
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
