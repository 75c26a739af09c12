// Package images turns the images tasks declare (the SDK's ImageSpec, sent
// to the built-in build-image task by the SDK's remote builder) into Python
// environments on this host: one per image content, built with uv from
// PyPI, kept in a cache with a size cap, and run by the local executor for
// every attempt whose task names the image.
//
// This file decides what a spec asks for and whether a Python environment
// can honour it; build.go writes the build as a script, store.go keeps the
// environments, task.go is the built-in task the SDK runs.
package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/errs"
)

// keyVersion changes when the same spec must build differently (a new
// layout of the environment): every key changes with it.
const keyVersion = "fm-env-1"

// Plan is how a spec becomes a Python environment.
type Plan struct {
	// Python is the interpreter version ("3.11") uv creates the
	// environment with.
	Python string
	// SDK is the flyte version the base image brings ("" for a plain
	// Python base): installed first.
	SDK string
	// Base says what the base image is, for the build's log.
	Base string
	// Steps install packages, in the order of the spec's layers.
	Steps []Step
	// Env is what the spec's env layers set, applied to every attempt
	// that runs in the environment.
	Env map[string]string
	// Notes are what the build ignores, for the build's log.
	Notes []string
}

// Step is one `uv pip install` of a layer.
type Step struct {
	Layer int    // 1-based index in the spec's layers
	What  string // the layer, as the build's log and errors name it
	// Args follow `uv pip install --python <env>`; a context-relative
	// path is written as ctxRef + path.
	Args []string
}

// ArgsIn returns the step's arguments with its context paths resolved in
// ctxDir, where the build's context was unpacked.
func (s Step) ArgsIn(ctxDir string) []string {
	out := make([]string, len(s.Args))
	for i, a := range s.Args {
		if rel, ok := strings.CutPrefix(a, ctxRef); ok {
			a = path.Join(ctxDir, rel)
		}
		out[i] = a
	}
	return out
}

// ContextPath checks a path of the build's context: relative and inside.
func ContextPath(p string) (string, error) { return contextPath(p) }

// ctxRef marks an argument that is a path in the build's context (the
// uploaded tarball), resolved when the build's directory is known.
const ctxRef = "\x00ctx/"

// LayerError is a layer a Python environment cannot honour.
type LayerError struct {
	Layer int // 1-based; 0 for the base image
	What  string
	Why   string
}

func (e *LayerError) Error() string {
	if e.Layer == 0 {
		return fmt.Sprintf("image build failed at the base image (%s): %s", e.What, e.Why)
	}
	return fmt.Sprintf("image build failed at layer %d (%s): %s", e.Layer, e.What, e.Why)
}

// flyteBase is the SDK's default base image: Python and the SDK, e.g.
// ghcr.io/flyteorg/flyte:py3.11-v2.12.1.
var flyteBase = regexp.MustCompile(`^ghcr\.io/flyteorg/flyte:py([0-9]+\.[0-9]+)-v([0-9][0-9A-Za-z.+-]*)$`)

// pythonBase is a plain Python image, e.g. python:3.12-slim-bookworm.
var pythonBase = regexp.MustCompile(`^(?:docker\.io/)?(?:library/)?python:([0-9]+\.[0-9]+)(?:\.[0-9]+)?(?:-slim)?(?:-(?:bookworm|bullseye|trixie))?$`)

var pythonVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// noRuntime explains a layer or base image a Python environment cannot
// honour; kubeBuilds says which of them the kubernetes executor's builder
// (package ocibuild) builds.
const (
	noRuntime = "a Python environment cannot honour it, and this manager builds images as Python environments only " +
		"(container image builds are not available in embedded mode)"
	kubeBuilds = "; remove the layer, or run the task on the kubernetes executor (its builder makes OCI images)"
	kubeNot    = "; remove the layer (install the package from a package layer), or build the image with the SDK's local builder"
)

// Analyse returns the plan for spec, or a *LayerError naming the first
// layer (or the base image) a Python environment cannot honour.
func Analyse(spec *ib.ImageSpec) (*Plan, error) {
	p := &Plan{Python: spec.GetPythonVersion(), Env: map[string]string{}}
	base := spec.GetBaseImage()
	switch m := flyteBase.FindStringSubmatch(base); {
	case m != nil:
		if p.Python == "" {
			p.Python = m[1]
		}
		p.SDK = m[2]
		p.Base = fmt.Sprintf("%s: Python %s with flyte==%s", base, p.Python, p.SDK)
	case pythonBase.MatchString(base):
		if p.Python == "" {
			p.Python = pythonBase.FindStringSubmatch(base)[1]
		}
		p.Base = fmt.Sprintf("%s: Python %s", base, p.Python)
	case base == "":
		p.Base = "no base image: Python " + p.Python
	default:
		return nil, &LayerError{What: base, Why: "a custom base image needs a container image; " + noRuntime + kubeBuilds}
	}
	if !pythonVersion.MatchString(p.Python) {
		return nil, &LayerError{What: base, Why: fmt.Sprintf("python_version %q is not MAJOR.MINOR", p.Python)}
	}
	for i, l := range spec.GetLayers() {
		n := i + 1
		if err := p.add(n, l); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// InstallStep is the `uv pip install` of a package layer (pip_packages,
// requirements, python_wheels, uv_project): isPackage is false for other
// layers; step is nil for a layer that installs nothing. Both builders
// (Python environments here, OCI images on kubernetes) use it.
func InstallStep(n int, l *ib.Layer) (step *Step, isPackage bool, err error) {
	switch {
	case l.GetPipPackages() != nil:
		pl := l.GetPipPackages()
		what := "pip_packages: " + strings.Join(pl.GetPackages(), " ")
		if len(pl.GetPackages()) == 0 {
			return nil, true, nil
		}
		args, err := pipOptions(pl.GetOptions())
		if err != nil {
			return nil, true, &LayerError{Layer: n, What: what, Why: err.Error()}
		}
		return &Step{Layer: n, What: what, Args: append(args, pl.GetPackages()...)}, true, nil
	case l.GetRequirements() != nil:
		r := l.GetRequirements()
		what := "requirements: " + r.GetFile()
		file, err := contextPath(r.GetFile())
		if err != nil {
			return nil, true, &LayerError{Layer: n, What: what, Why: err.Error()}
		}
		args, err := pipOptions(r.GetOptions())
		if err != nil {
			return nil, true, &LayerError{Layer: n, What: what, Why: err.Error()}
		}
		return &Step{Layer: n, What: what, Args: append(args, "-r", ctxRef+file)}, true, nil
	case l.GetPythonWheels() != nil:
		w := l.GetPythonWheels()
		what := "python_wheels: " + w.GetDir()
		dir, err := contextPath(w.GetDir())
		if err != nil {
			return nil, true, &LayerError{Layer: n, What: what, Why: err.Error()}
		}
		args, err := pipOptions(w.GetOptions())
		if err != nil {
			return nil, true, &LayerError{Layer: n, What: what, Why: err.Error()}
		}
		if w.GetPackageName() == "" {
			return nil, true, &LayerError{Layer: n, What: what, Why: "the layer names no package (package_name): upgrade the flyte SDK"}
		}
		args = append(args, "--find-links", ctxRef+dir, w.GetPackageName())
		return &Step{Layer: n, What: what, Args: args}, true, nil
	case l.GetUvProject() != nil:
		u := l.GetUvProject()
		what := "uv_project: " + u.GetPyproject()
		dir, err := contextPath(u.GetPyproject())
		if err != nil {
			return nil, true, &LayerError{Layer: n, What: what, Why: err.Error()}
		}
		opts := proto.Clone(u.GetOptions()).(*ib.PipOptions)
		if opts == nil {
			opts = &ib.PipOptions{}
		}
		// --no-install-project is uv sync's: here it means the
		// project's dependencies only.
		fields := strings.Fields(opts.GetExtraArgs())
		depsOnly := slices.Contains(fields, "--no-install-project")
		opts.ExtraArgs = strings.Join(slices.DeleteFunc(fields, func(f string) bool { return f == "--no-install-project" }), " ")
		args, err := pipOptions(opts)
		if err != nil {
			return nil, true, &LayerError{Layer: n, What: what, Why: err.Error()}
		}
		if depsOnly {
			args = append(args, "-r", ctxRef+path.Join(dir, "pyproject.toml"))
		} else {
			args = append(args, ctxRef+dir)
		}
		return &Step{Layer: n, What: what, Args: args}, true, nil
	}
	return nil, false, nil
}

func (p *Plan) add(n int, l *ib.Layer) error {
	if st, ok, err := InstallStep(n, l); ok {
		if st != nil {
			p.Steps = append(p.Steps, *st)
		}
		return err
	}
	switch {
	case l.GetEnv() != nil:
		for k, v := range l.GetEnv().GetEnvVariables() {
			p.Env[k] = v
		}
	case l.GetWorkdir() != nil:
		p.Notes = append(p.Notes, fmt.Sprintf("layer %d (workdir: %s) is not used: each attempt runs in a working directory of its own",
			n, l.GetWorkdir().GetWorkdir()))
	case l.GetAptPackages() != nil:
		return &LayerError{Layer: n, What: "apt_packages: " + strings.Join(l.GetAptPackages().GetPackages(), " "),
			Why: "apt packages need a container image; " + noRuntime + kubeNot}
	case l.GetCommands() != nil:
		return &LayerError{Layer: n, What: "commands: " + strings.Join(l.GetCommands().GetCmd(), "; "),
			Why: "commands need a container image; " + noRuntime + kubeNot}
	case l.GetCopyConfig() != nil:
		c := l.GetCopyConfig()
		return &LayerError{Layer: n, What: fmt.Sprintf("copy_config: %s to %s", c.GetSrc(), c.GetDst()),
			Why: "copying files into the image needs a container image; " + noRuntime + kubeBuilds}
	case l.GetPoetryProject() != nil:
		return &LayerError{Layer: n, What: "poetry_project: " + l.GetPoetryProject().GetPyproject(),
			Why: "poetry projects are not supported by this manager's builder; export the project's requirements (with_requirements) instead"}
	default:
		return &LayerError{Layer: n, What: "an unknown layer", Why: "this manager does not know the layer type: upgrade the manager"}
	}
	return nil
}

// pipOptions turns a layer's options into uv pip install arguments.
func pipOptions(o *ib.PipOptions) ([]string, error) {
	var args []string
	if u := o.GetIndexUrl(); u != "" {
		args = append(args, "--index-url", u)
	}
	for _, u := range o.GetExtraIndexUrls() {
		args = append(args, "--extra-index-url", u)
	}
	if o.GetPre() {
		args = append(args, "--prerelease=allow")
	}
	for _, f := range strings.Fields(o.GetExtraArgs()) {
		if f == "--python" || strings.HasPrefix(f, "--python=") || f == "--target" || strings.HasPrefix(f, "--target=") ||
			f == "--prefix" || strings.HasPrefix(f, "--prefix=") || f == "--system" {
			return nil, fmt.Errorf("extra_args %q: %s chooses where packages go, which is the builder's to choose", o.GetExtraArgs(), f)
		}
		args = append(args, f)
	}
	return args, nil
}

// contextPath checks a path of the build's context: relative and inside.
func contextPath(p string) (string, error) {
	c := path.Clean(p)
	if p == "" || path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("the path %q is not inside the build's context", p)
	}
	return c, nil
}

// Key is the content address of an environment: the spec (deterministic
// encoding), the digest of its context tarball ("" for none), and the
// builder's layout version.
func Key(spec *ib.ImageSpec, contextDigest string) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	if err != nil {
		return "", errs.Invalidf("image spec cannot be encoded: %v", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", keyVersion, len(b))
	h.Write(b)
	h.Write([]byte("\x00" + contextDigest))
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// sortedEnv returns env's names in order.
func sortedEnv(env map[string]string) []string {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
