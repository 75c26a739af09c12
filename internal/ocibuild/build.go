package ocibuild

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/images"
)

// DefaultBase is the SDK's debian base (Image.from_debian_base()), the
// base of a spec that names none.
const DefaultBase = "ghcr.io/flyteorg/flyte:py3.11-v2.12.1"

// PackagesDir is where the package layers' packages are installed in the
// image (uv pip install --target): on PYTHONPATH, their scripts on PATH.
const PackagesDir = "/opt/flyte-manager/packages"

// defaultPath is the PATH of an image whose config sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Job is one build.
type Job struct {
	Spec    *ib.ImageSpec
	Context []byte // the gzipped context tarball; nil for none
	Target  string // the SDK's target_image
	// UV is the uv binary the package layers install with.
	UV string
	// WorkDir is an empty directory the build may use.
	WorkDir string
	// Log receives the build's progress and uv's output.
	Log io.Writer
}

// pythonOf reads the Python version a base image brings.
var pythonOf = regexp.MustCompile(`(?:^|[/:])(?:flyte:)?py(?:thon:)?([0-9]+\.[0-9]+)`)

// Build builds j's image, pushes it under r and answers its fqin. A
// *images.LayerError names the layer (or base image) that failed.
func (r Registry) Build(ctx context.Context, j Job) (string, error) {
	spec := j.Spec
	fqin := r.FQIN(j.Target)
	target, err := r.ref(fqin)
	if err != nil {
		return "", fmt.Errorf("target image %q: %v", j.Target, err)
	}
	// What cannot be built without a runtime fails before anything is
	// pulled or installed.
	for i, l := range spec.GetLayers() {
		if err := unsupported(i+1, l); err != nil {
			return "", err
		}
	}
	baseName := spec.GetBaseImage()
	if baseName == "" {
		baseName = DefaultBase
	}
	baseRef, err := r.ref(baseName)
	if err != nil {
		return "", &images.LayerError{What: baseName, Why: "not an image reference: " + err.Error()}
	}
	platforms, err := platformsOf(spec.GetPlatform())
	if err != nil {
		return "", &images.LayerError{What: baseName, Why: err.Error()}
	}
	if len(j.Context) > 0 {
		if err := images.Unpack(j.Context, filepath.Join(j.WorkDir, "context")); err != nil {
			return "", err
		}
	}
	var built []mutate.IndexAddendum
	for _, p := range platforms {
		logf(j.Log, "== base image %s (%s)", baseName, p)
		img, err := r.buildFor(ctx, j, baseName, baseRef, p)
		if err != nil {
			return "", err
		}
		built = append(built, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	logf(j.Log, "== pushing %s", fqin)
	var digest v1.Hash
	if len(built) == 1 {
		img := built[0].Add.(v1.Image)
		if digest, err = img.Digest(); err == nil {
			err = remote.Write(target, img, r.remoteOptions(ctx)...)
		}
	} else {
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), built...)
		if digest, err = idx.Digest(); err == nil {
			err = remote.WriteIndex(target, idx, r.remoteOptions(ctx)...)
		}
	}
	if err != nil {
		return "", fmt.Errorf("pushing %s failed: %w", fqin, err)
	}
	logf(j.Log, "== pushed %s (%s)", fqin, digest)
	return fqin, nil
}

// platformsOf reads the spec's platforms (os/arch[/variant]); none is
// linux on the builder's architecture.
func platformsOf(specs []string) ([]v1.Platform, error) {
	if len(specs) == 0 {
		return []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}, nil
	}
	var out []v1.Platform
	for _, s := range specs {
		p, err := v1.ParsePlatform(s)
		if err != nil || p.OS != "linux" || p.Architecture == "" {
			return nil, fmt.Errorf("platform %q is not linux/<architecture>", s)
		}
		out = append(out, *p)
	}
	return out, nil
}

// buildFor builds the image of j for one platform on the base.
func (r Registry) buildFor(ctx context.Context, j Job, baseName string, baseRef name.Reference, platform v1.Platform) (v1.Image, error) {
	spec := j.Spec
	img, err := remote.Image(baseRef, append(r.remoteOptions(ctx), remote.WithPlatform(platform))...)
	if err != nil {
		return nil, &images.LayerError{What: baseName, Why: "pulling it failed: " + err.Error()}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, &images.LayerError{What: baseName, Why: "its config cannot be read: " + err.Error()}
	}
	if cf.Architecture != "" && cf.Architecture != platform.Architecture {
		return nil, &images.LayerError{What: baseName, Why: fmt.Sprintf("it is for %s/%s, not %s", cf.OS, cf.Architecture, platform)}
	}
	cfg := cf.Config.DeepCopy()
	python := spec.GetPythonVersion()
	if m := pythonOf.FindStringSubmatch(baseName); python == "" && m != nil {
		python = m[1]
	}

	ctxDir := filepath.Join(j.WorkDir, "context")
	pkgRoot := filepath.Join(j.WorkDir, "packages-"+strings.ReplaceAll(platform.String(), "/", "-"))
	pkgLayerAt := -1 // where the packages' layer goes among the layers
	var layers []v1.Layer
	for i, l := range spec.GetLayers() {
		n := i + 1
		step, isPkg, err := images.InstallStep(n, l)
		if err != nil {
			return nil, err
		}
		switch {
		case isPkg:
			if step == nil {
				continue
			}
			if python == "" {
				return nil, &images.LayerError{Layer: n, What: step.What,
					Why: "the image's Python version is unknown: set python_version, or use a flyte or python base image"}
			}
			if pkgLayerAt < 0 {
				pkgLayerAt = len(layers)
			}
			logf(j.Log, "== layer %d: %s", n, step.What)
			if err := j.install(ctx, step, python, platform, ctxDir, filepath.Join(pkgRoot, PackagesDir)); err != nil {
				return nil, err
			}
		case l.GetEnv() != nil:
			logf(j.Log, "== layer %d: env", n)
			for _, k := range sortedKeys(l.GetEnv().GetEnvVariables()) {
				cfg.Env = setEnv(cfg.Env, k, l.GetEnv().GetEnvVariables()[k])
			}
		case l.GetWorkdir() != nil:
			logf(j.Log, "== layer %d: workdir %s", n, l.GetWorkdir().GetWorkdir())
			cfg.WorkingDir = l.GetWorkdir().GetWorkdir()
		case l.GetCopyConfig() != nil:
			c := l.GetCopyConfig()
			what := fmt.Sprintf("copy_config: %s to %s", c.GetSrc(), c.GetDst())
			logf(j.Log, "== layer %d: %s", n, what)
			layer, err := copyLayer(ctxDir, c.GetSrc(), c.GetDst(), cfg.WorkingDir)
			if err != nil {
				return nil, &images.LayerError{Layer: n, What: what, Why: err.Error()}
			}
			layers = append(layers, layer)
		}
	}
	if pkgLayerAt >= 0 {
		layer, err := dirLayer(pkgRoot)
		if err != nil {
			return nil, fmt.Errorf("packing the packages' layer: %w", err)
		}
		layers = append(layers[:pkgLayerAt], append([]v1.Layer{layer}, layers[pkgLayerAt:]...)...)
		cfg.Env = setEnv(cfg.Env, "PYTHONPATH", joinPath(PackagesDir, envOf(cfg.Env, "PYTHONPATH")))
		basePath := envOf(cfg.Env, "PATH")
		if basePath == "" {
			basePath = defaultPath
		}
		cfg.Env = setEnv(cfg.Env, "PATH", joinPath(PackagesDir+"/bin", basePath))
	}
	if img, err = mutate.AppendLayers(img, layers...); err != nil {
		return nil, err
	}
	return mutate.Config(img, *cfg)
}

// unsupported names a layer this builder cannot build.
func unsupported(n int, l *ib.Layer) error {
	const noRuntime = "building it runs a program inside the image, which needs a container runtime; " +
		"this manager builds images without one (install it from a package layer, or build the image with the SDK's local builder)"
	switch {
	case l.GetAptPackages() != nil:
		return &images.LayerError{Layer: n, What: "apt_packages: " + strings.Join(l.GetAptPackages().GetPackages(), " "), Why: noRuntime}
	case l.GetCommands() != nil:
		return &images.LayerError{Layer: n, What: "commands: " + strings.Join(l.GetCommands().GetCmd(), "; "), Why: noRuntime}
	case l.GetPoetryProject() != nil:
		return &images.LayerError{Layer: n, What: "poetry_project: " + l.GetPoetryProject().GetPyproject(),
			Why: "poetry projects are not supported by this manager's builder; export the project's requirements (with_requirements) instead"}
	case l.GetPipPackages() != nil, l.GetRequirements() != nil, l.GetPythonWheels() != nil, l.GetUvProject() != nil,
		l.GetEnv() != nil, l.GetWorkdir() != nil, l.GetCopyConfig() != nil:
		return nil
	}
	return &images.LayerError{Layer: n, What: "an unknown layer", Why: "this manager does not know the layer type: upgrade the manager"}
}

// install runs a package layer's `uv pip install` into dir, for the
// image's Python version and platform (not the builder's).
func (j Job) install(ctx context.Context, st *images.Step, python string, p v1.Platform, ctxDir, dir string) error {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[p.Architecture]
	if arch == "" {
		arch = p.Architecture
	}
	args := []string{"pip", "install", "--no-config", "--target", dir, "--python-version", python,
		"--python-platform", arch + "-manylinux_2_28"}
	uv, err := exec.LookPath(j.UV)
	if err != nil {
		return &images.LayerError{Layer: st.Layer, What: st.What, Why: fmt.Sprintf("the builder has no uv (%s) to install packages with: "+
			"run the builds in an image with flyte-manager and uv (executor.kubernetes.images.builderImage)", j.UV)}
	}
	cmd := exec.CommandContext(ctx, uv, append(args, st.ArgsIn(ctxDir)...)...)
	cmd.Env = append(os.Environ(), "UV_CACHE_DIR="+filepath.Join(j.WorkDir, "uv-cache"))
	cmd.Stdout, cmd.Stderr = j.Log, j.Log
	if err := cmd.Run(); err != nil {
		return &images.LayerError{Layer: st.Layer, What: st.What, Why: "uv pip install failed (" + err.Error() + "); the build's log says why"}
	}
	return nil
}

// copyLayer is a layer holding the context's src at dst, as COPY src dst
// does: a relative dst is in the working directory (workdir, else /), a
// file copied to a directory (dst ending in /, or . or ..) keeps its
// name, and a directory's contents go into dst.
func copyLayer(ctxDir, src, dst, workdir string) (v1.Layer, error) {
	rel, err := images.ContextPath(src)
	if err != nil {
		return nil, err
	}
	if dst == "" {
		dst = "."
	}
	intoDir := strings.HasSuffix(dst, "/") || dst == "." || dst == ".." || strings.HasSuffix(dst, "/.")
	if !path.IsAbs(dst) {
		if workdir == "" {
			workdir = "/"
		}
		dst = path.Join(workdir, dst)
	}
	if intoDir {
		dst += "/"
	}
	from := filepath.Join(ctxDir, filepath.FromSlash(rel))
	fi, err := os.Stat(from)
	if err != nil {
		return nil, fmt.Errorf("%s is not in the build's context", src)
	}
	if !fi.IsDir() && strings.HasSuffix(dst, "/") {
		dst = path.Join(dst, path.Base(rel))
	}
	return treeLayer(from, path.Clean(dst))
}

// dirLayer is a layer of everything under root, at the same paths in the
// image.
func dirLayer(root string) (v1.Layer, error) { return treeLayer(root, "/") }

// treeLayer is a layer of the file or tree at from, placed at dst:
// directories, regular files and symbolic links, in a stable order with
// zero times, so that the same content gives the same layer.
func treeLayer(from, dst string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// The parents of dst.
	parts := strings.Split(strings.Trim(dst, "/"), "/")
	for i := 1; i < len(parts) && parts[0] != ""; i++ {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts[:i], "/") + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Join(dst, filepath.ToSlash(rel)), "/")
		if name == "" {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm())}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			return nil // devices, sockets: not image content
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// setEnv sets k in a config's KEY=VALUE list.
func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

func envOf(env []string, k string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

func joinPath(first, rest string) string {
	if rest == "" {
		return first
	}
	return first + ":" + rest
}
