package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	path2 "path"
	"path/filepath"
	"strings"
	"time"

	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
)

// Images as root filesystems. A spec whose layers a Python environment
// cannot honour (apt packages, commands) becomes, on a host where the
// local executor's container runtime (runc) works, a Debian root
// filesystem instead, built by one mmdebstrap run:
//
//   - the base: Debian (minbase) of the suite whose python3 is the spec's
//     Python version (RootfsSuites), with python3 and ca-certificates;
//   - a virtualenv in VenvDir made by uv (copied in for the build only)
//     with the SDK's version of flyte when the base image names one;
//   - then every layer in the spec's order, each a customize hook of
//     mmdebstrap: apt_packages is `apt-get install`, commands are run by
//     /bin/sh, pip layers are `uv pip install` into the virtualenv;
//   - the build's helpers (uv, the context, uv's cache) are removed again.
//
// The whole build runs as root of a user namespace of its own whose ids
// are an unprivileged range of the host's (the executor maps them): package
// scripts and the layers' commands are root in the image, never on the
// host. mmdebstrap writes the result as a tarball into the build's staging
// directory, which the manager unpacks into the store (InstallRootfs).
// Before each step the script writes the step's layer number into
// RootfsStepFile; the script's exit code is ExitLayer+that number when the
// build fails, so that the error names the layer as a Python build's does.

// VenvDir is the virtualenv of a root filesystem image.
const VenvDir = "/opt/venv"

// RootfsSuites are the Debian suites a root filesystem is built from, by
// the Python version (MAJOR.MINOR) of their python3.
var RootfsSuites = map[string]string{"3.11": "bookworm", "3.13": "trixie"}

// RootfsTarball and RootfsStepFile are in the build's staging directory.
const (
	RootfsTarball  = "rootfs.tar"
	RootfsStepFile = "step"
	rootfsBuildDir = "/fm-build" // inside the image, during the build only
)

// RootfsPlan is how a spec becomes a root filesystem.
type RootfsPlan struct {
	*Plan
	Suite  string
	Layers []RootfsLayer // in the spec's order
}

// RootfsLayer is one step of the build.
type RootfsLayer struct {
	Layer    int
	What     string
	Apt      []string // apt_packages
	Commands []string // commands, each run by /bin/sh
	Pip      *Step    // a pip layer (its Args as Plan.Steps has them)
}

// NeedsRootfs says whether spec has a layer only a root filesystem can
// honour (apt_packages, commands).
func NeedsRootfs(spec *ib.ImageSpec) bool {
	for _, l := range spec.GetLayers() {
		if l.GetAptPackages() != nil || l.GetCommands() != nil {
			return true
		}
	}
	return false
}

// AnalyseRootfs returns the root filesystem plan of spec, or a
// *LayerError naming the first layer (or the base image) it cannot honour.
func AnalyseRootfs(spec *ib.ImageSpec) (*RootfsPlan, error) {
	// The base image and the Python layers are checked as for an
	// environment: analyse a copy without the root filesystem's layers.
	var layers []*ib.Layer
	for _, l := range spec.GetLayers() {
		if l.GetAptPackages() != nil || l.GetCommands() != nil {
			layers = append(layers, &ib.Layer{Layer: &ib.Layer_Env{Env: &ib.Env{}}})
			continue
		}
		layers = append(layers, l)
	}
	p, err := Analyse(&ib.ImageSpec{BaseImage: spec.GetBaseImage(), PythonVersion: spec.GetPythonVersion(), Layers: layers})
	if err != nil {
		return nil, err
	}
	r := &RootfsPlan{Plan: p, Suite: RootfsSuites[p.Python]}
	if r.Suite == "" {
		return nil, &LayerError{What: spec.GetBaseImage(), Why: fmt.Sprintf(
			"an image with apt packages or commands is a Debian root filesystem, and no Debian suite this manager builds from has Python %s (%s)",
			p.Python, suitesText())}
	}
	p.Base = fmt.Sprintf("%s: Debian %s with Python %s", orNone(spec.GetBaseImage()), r.Suite, p.Python)
	if p.SDK != "" {
		p.Base += " and flyte==" + p.SDK
	}
	steps := map[int]*Step{}
	for i := range p.Steps {
		steps[p.Steps[i].Layer] = &p.Steps[i]
	}
	for i, l := range spec.GetLayers() {
		n := i + 1
		switch {
		case l.GetAptPackages() != nil:
			pkgs := l.GetAptPackages().GetPackages()
			for _, pkg := range pkgs {
				if pkg == "" || strings.HasPrefix(pkg, "-") || strings.ContainsAny(pkg, " \t\n'\"\\$`;&|<>") {
					return nil, &LayerError{Layer: n, What: "apt_packages: " + strings.Join(pkgs, " "),
						Why: fmt.Sprintf("%q is not a Debian package name", pkg)}
				}
			}
			if len(pkgs) > 0 {
				r.Layers = append(r.Layers, RootfsLayer{Layer: n, What: "apt_packages: " + strings.Join(pkgs, " "), Apt: pkgs})
			}
		case l.GetCommands() != nil:
			cmds := l.GetCommands().GetCmd()
			if len(cmds) > 0 {
				r.Layers = append(r.Layers, RootfsLayer{Layer: n, What: "commands: " + strings.Join(cmds, "; "), Commands: cmds})
			}
		case steps[n] != nil:
			r.Layers = append(r.Layers, RootfsLayer{Layer: n, What: steps[n].What, Pip: steps[n]})
		}
	}
	return r, nil
}

func orNone(base string) string {
	if base == "" {
		return "no base image"
	}
	return base
}

func suitesText() string {
	var parts []string
	for _, v := range sortedEnv(RootfsSuites) {
		parts = append(parts, "Debian "+RootfsSuites[v]+" has Python "+v)
	}
	return strings.Join(parts, ", ")
}

// FailedLayer returns the error for a root filesystem build that exited
// with code (nil for a code the script does not use for a step).
func (r *RootfsPlan) FailedLayer(code int) error {
	return failedLayer(code, r.Base, "building the Debian root filesystem failed", r.Layers,
		func(l RootfsLayer) (int, string) { return l.Layer, l.What }, "the layer failed")
}

// RootfsScript returns the build of key as a POSIX shell script, run by
// /bin/sh as root of the build's user namespace: uv is the uv binary and
// caFile the host's CA bundle (copied in for the build's downloads, ""
// for none), ctxDir the extracted context ("" for none), staging the
// build's staging directory, its user namespace root's; mirror the Debian
// mirror ("" for mmdebstrap's default).
func RootfsScript(r *RootfsPlan, key, uv, caFile, ctxDir, staging, mirror string) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	in := func(p string) string { return rootfsBuildDir + "/" + p }
	stepFile := filepath.Join(staging, RootfsStepFile)
	var hooks []string
	hook := func(layer int, title, cmd string) {
		hooks = append(hooks, fmt.Sprintf("echo %s; echo %d > %s && %s", shq(title), layer, shq(stepFile), cmd))
	}
	chroot := func(cmd string) string {
		return `chroot "$1" /usr/bin/env -i PATH=` + VenvDir + `/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ` +
			`HOME=/root DEBIAN_FRONTEND=noninteractive UV_NO_PROGRESS=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never ` +
			`UV_CACHE_DIR=` + in("cache") + ` SSL_CERT_FILE=` + in("ca.crt") + " " + cmd
	}
	uvIn := in("uv")
	setup := `mkdir -p "$1` + rootfsBuildDir + `" && cp ` + shq(uv) + ` "$1` + uvIn + `"`
	if caFile != "" {
		setup += ` && cp ` + shq(caFile) + ` "$1` + in("ca.crt") + `"`
	} else {
		setup += ` && cp "$1/etc/ssl/certs/ca-certificates.crt" "$1` + in("ca.crt") + `"`
	}
	if ctxDir != "" {
		setup += ` && cp -R ` + shq(ctxDir) + ` "$1` + in("ctx") + `"`
	}
	setup += " && " + chroot(uvIn+" venv --relocatable --no-config --quiet --python /usr/bin/python3 "+VenvDir)
	if r.SDK != "" {
		setup += " && " + chroot(uvIn+" pip install --no-config --python "+VenvDir+"/bin/python "+shq("flyte=="+r.SDK))
	}
	hook(0, "== the Python environment "+VenvDir, setup)
	for _, l := range r.Layers {
		title := fmt.Sprintf("== layer %d: %s", l.Layer, l.What)
		n := min(l.Layer, maxExit-ExitLayer)
		switch {
		case l.Apt != nil:
			hook(n, title, chroot("apt-get install -y --no-install-recommends "+strings.Join(l.Apt, " ")))
		case l.Commands != nil:
			var cmds []string
			for _, c := range l.Commands {
				cmds = append(cmds, chroot("/bin/sh -c "+shq(c)))
			}
			hook(n, title, strings.Join(cmds, " && "))
		case l.Pip != nil:
			args := make([]string, 0, len(l.Pip.Args))
			for _, a := range l.Pip.Args {
				if rel, ok := strings.CutPrefix(a, ctxRef); ok {
					a = in("ctx/" + rel)
				}
				args = append(args, shq(a))
			}
			hook(n, title, chroot(uvIn+" pip install --no-config --python "+VenvDir+"/bin/python "+strings.Join(args, " ")))
		}
	}
	hooks = append(hooks, `rm -rf "$1`+rootfsBuildDir+`" "$1"/root/.cache "$1"/var/cache/apt/*.bin "$1"/var/lib/apt/lists/*`)

	line("set -u")
	line("echo %s", shq("== base image "+r.Base))
	for _, n := range r.Notes {
		line("echo %s", shq("note: "+n))
	}
	line("echo 0 > %s || exit %d", shq(stepFile), ExitBase)
	args := []string{"mmdebstrap", "--mode=root", "--variant=minbase", "--include=python3,ca-certificates",
		"--skip=output/dev", "--format=tar"}
	for _, h := range hooks {
		args = append(args, "--customize-hook="+h)
	}
	args = append(args, r.Suite, filepath.Join(staging, RootfsTarball))
	if mirror != "" {
		args = append(args, mirror)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shq(a)
	}
	line("TMPDIR=%s %s", shq(staging), strings.Join(quoted, " "))
	line(`rc=$?; if [ "$rc" -ne 0 ]; then exit $((%d + $(cat %s))); fi`, ExitLayer, shq(stepFile))
	line("echo %s", shq("== built "+key+": the manager moves it into the store"))
	return b.String()
}

// rootfsDir is where a root filesystem image keeps its files, in its
// directory of the store (whose ready mark and manifest stay outside the
// image).
const rootfsDir = "rootfs"

// RootfsDir is key's root filesystem (a root filesystem image's).
func (s *Store) RootfsDir(key string) string { return filepath.Join(s.EnvDir(key), rootfsDir) }

// RootfsFQIN is the fqin of a root filesystem image: an environment's
// (FQIN) whose repository says it is a root filesystem.
func RootfsFQIN(target, key string) string {
	name := FQIN(target, key)
	i := strings.LastIndex(name, ":")
	return name[:i] + "-rootfs" + name[i:]
}

// InstallRootfs unpacks the tarball a root filesystem build left in
// staging into the store as key's (the manager does this, as root: the
// tarball's owners are the image's). It takes directories, regular files,
// symbolic and hard links only, every name inside the image. reused is
// true when key's image was there already. staging is removed either way.
func (s *Store) InstallRootfs(staging, key, target string, r *RootfsPlan) (reused bool, err error) {
	defer func() { _ = removeTree(staging) }()
	if _, ok := s.Ready(key); ok {
		return true, nil
	}
	tarball := filepath.Join(staging, RootfsTarball)
	if err := checkTarball(tarball); err != nil {
		return false, err
	}
	dir := filepath.Join(s.dir, stagingDir, "rootfs-"+key)
	if err := os.RemoveAll(dir); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Join(dir, rootfsDir), 0o700); err != nil {
		return false, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cmd := exec.Command("tar", "--extract", "--file", tarball, "--directory", filepath.Join(dir, rootfsDir),
		"--numeric-owner", "--same-owner", "--same-permissions", "--no-overwrite-dir")
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("unpacking the root filesystem: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Chmod(filepath.Join(dir, rootfsDir), 0o755); err != nil {
		return false, err
	}
	size, err := dirSize(filepath.Join(dir, rootfsDir))
	if err != nil {
		return false, err
	}
	m := &Manifest{Key: key, FQIN: RootfsFQIN(target, key), Name: target, Python: r.Python, SDK: r.SDK, Env: r.Env,
		Bytes: size, Built: time.Now().UTC(), Rootfs: true}
	if err := writeJSON(filepath.Join(dir, manifestFile), m); err != nil {
		return false, err
	}
	if err := os.WriteFile(filepath.Join(dir, readyFile), nil, 0o444); err != nil {
		return false, err
	}
	if err := os.Rename(dir, s.EnvDir(key)); err != nil {
		if _, ok := s.Ready(key); ok {
			return true, nil
		}
		if rerr := removeTree(s.EnvDir(key)); rerr != nil {
			return false, err
		}
		if err := os.Rename(dir, s.EnvDir(key)); err != nil {
			return false, err
		}
	}
	return false, os.Chmod(s.EnvDir(key), 0o700)
}

// checkTarball checks a root filesystem tarball's entries (the build ran
// code of the image's, which could have written it).
func checkTarball(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the build left no root filesystem: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("the root filesystem is not a readable tarball: %w", err)
		}
		n++
		name := strings.TrimPrefix(h.Name, "./")
		if c := path2.Clean("/" + name); name != "" && c != "/"+strings.TrimSuffix(name, "/") {
			return fmt.Errorf("the root filesystem has an entry %q that is not a clean path inside it", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
		case tar.TypeLink:
			if l := h.Linkname; strings.HasPrefix(l, "/") || path2.Clean("/"+l) != "/"+strings.TrimPrefix(l, "./") {
				return fmt.Errorf("the root filesystem has a hard link %q to %q, outside it", h.Name, h.Linkname)
			}
		default:
			return fmt.Errorf("the root filesystem has %q, which is not a file, a directory or a link", h.Name)
		}
	}
	if n == 0 {
		return errors.New("the root filesystem is empty")
	}
	return nil
}
