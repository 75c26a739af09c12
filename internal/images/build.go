package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// A build runs as one shell script (Script) that the local executor starts
// as the attempt's process, as the attempt's user (never root): its output
// is the attempt's log, and abort, timeout and restart treat it as any
// attempt's. The script builds into a staging directory of its own
// (StagingDir, see install.go) and never touches the store: the manager
// holds the key's lock around the build (Claim) and moves the finished
// environment into the store itself (Install).
// Its exit code says which step failed: ExitBase for the environment and
// the base image's SDK, ExitLayer+n for layer n.
const (
	ExitBase  = 10
	ExitLayer = 10
	maxExit   = 250
)

// FailedLayer returns the error for a build that exited with code (nil
// for a code the script does not use for a step).
func (p *Plan) FailedLayer(code int) error {
	return failedLayer(code, p.Base, "creating the Python environment failed", p.Steps,
		func(s Step) (int, string) { return s.Layer, s.What }, "uv pip install failed")
}

// failedLayer maps a build script's exit code to what failed: ExitBase is
// the base (baseWhy), ExitLayer+n the step of layer n (why; layers past
// what an exit code holds share the last code); nil for any other code.
func failedLayer[S any](code int, base, baseWhy string, steps []S, of func(S) (int, string), why string) error {
	const hint = "; the attempt's log says why"
	if code < ExitBase || code > maxExit {
		return nil
	}
	if code == ExitBase {
		return &LayerError{What: base, Why: baseWhy + hint}
	}
	n := code - ExitLayer
	for _, s := range steps {
		if layer, what := of(s); min(layer, maxExit-ExitLayer) == n {
			return &LayerError{Layer: layer, What: what, Why: why + hint}
		}
	}
	return nil
}

// Script returns the build of key as a POSIX shell script run by /bin/sh:
// uv is the uv binary, python the interpreter (a path, or the plan's
// version for uv to find), ctxDir the extracted context ("" for none),
// staging the build's staging directory (StagingDir): the environment is
// made in StagedEnv(staging), relocatable (uv venv --relocatable: its
// activation scripts and every console script installed later find the
// interpreter relative to themselves), so that it works once the manager
// moved it into the store.
func (s *Store) Script(p *Plan, key, uv, python, ctxDir, staging string) string {
	var b strings.Builder
	env := StagedEnv(staging)
	py := filepath.Join(env, "bin", "python")
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("set -u")
	line("echo %s", shq("== base image "+p.Base))
	for _, n := range p.Notes {
		line("echo %s", shq("note: "+n))
	}
	line("%s venv --relocatable --no-config --quiet --python %s %s || exit %d", shq(uv), shq(python), shq(env), ExitBase)
	if p.SDK != "" {
		line("%s pip install --no-config --python %s %s || exit %d", shq(uv), shq(py), shq("flyte=="+p.SDK), ExitBase)
	}
	for _, st := range p.Steps {
		line("echo %s", shq(fmt.Sprintf("== layer %d: %s", st.Layer, st.What)))
		args := make([]string, 0, len(st.Args))
		for _, a := range st.Args {
			if rel, ok := strings.CutPrefix(a, ctxRef); ok {
				a = filepath.Join(ctxDir, filepath.FromSlash(rel))
			}
			args = append(args, shq(a))
		}
		line("%s pip install --no-config --python %s %s || exit %d", shq(uv), shq(py), strings.Join(args, " "),
			ExitLayer+min(st.Layer, maxExit-ExitLayer))
	}
	line("echo %s", shq("== built "+key+": the manager moves it into the store"))
	return b.String()
}

// WaitScript is the process of a build that found another build of the
// same key running (Claim): it says so in its log and waits until the
// manager creates wake, when that build ended; the manager then answers
// with that build's environment.
func WaitScript(key, wake string) string {
	return fmt.Sprintf("echo %s\nwhile [ ! -e %s ]; do sleep 1; done\necho %s\n",
		shq("another build of this image ("+key+") is running: waiting for it"), shq(wake),
		shq("the other build ended"))
}

// ReadyScript is the process of a build whose environment is built
// already.
func ReadyScript(key string) string {
	return fmt.Sprintf("echo %s\n", shq("the environment "+key+" is built already: nothing to do"))
}

// shq quotes s for the shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// maxContextBytes bounds what a context tarball may unpack to.
const maxContextBytes = 2 << 30

// ContextDigest is the digest of a context tarball as Key takes it.
func ContextDigest(tarball []byte) string {
	if len(tarball) == 0 {
		return ""
	}
	sum := sha256.Sum256(tarball)
	return hex.EncodeToString(sum[:])
}

// Unpack extracts a gzipped tarball (the SDK's build context) into dir:
// directories and regular files only, every path inside dir.
func Unpack(tarball []byte, dir string) error {
	zr, err := gzip.NewReader(bytes.NewReader(tarball))
	if err != nil {
		return fmt.Errorf("the build context is not a gzipped tarball: %w", err)
	}
	tr := tar.NewReader(zr)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the build context is not a readable tarball: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if _, err := contextPath(name); err != nil {
			return fmt.Errorf("the build context: %w", err)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if total += h.Size; total > maxContextBytes {
				return fmt.Errorf("the build context unpacks to more than %d bytes", int64(maxContextBytes))
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			// Links and devices: the layers need files and directories only.
		}
	}
}
