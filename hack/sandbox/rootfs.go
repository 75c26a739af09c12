package main

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"fmgr.dev/hack/internal/ociimage"
)

// The root filesystem's contents.
const (
	venvDir = "/opt/flyte" // the SDK's venv; its bin is executor.local.python
	// packages: Python for the venv, CA certificates for the SDK's TLS, tini
	// as PID 1 to reap the orphans tasks leave.
	packages = "python3,python3-venv,ca-certificates,tini"
)

// wheels downloads flyte==sdkVersion and its dependencies once into the
// cache and returns the directory.
func wheels(ctx context.Context, o options, log io.Writer) (string, error) {
	name := "wheels-" + o.sdkVersion
	if o.uvVersion != "" {
		name += "-uv" + o.uvVersion
	}
	dir, err := filepath.Abs(filepath.Join(o.cache, name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	ociimage.Logf(log, "downloading flyte==%s and its dependencies into %s", o.sdkVersion, dir)
	cmd := exec.CommandContext(ctx, o.pip, append([]string{"download", "--quiet", "--disable-pip-version-check", "-d", tmp}, requirements(o)...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pip download: %v\n%s", err, b)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dir)
}

// requirements are what the sandbox's venv installs: the SDK, and uv
// (which the manager builds images' environments with) when asked for.
func requirements(o options) []string {
	r := []string{"flyte==" + o.sdkVersion}
	if o.uvVersion != "" {
		r = append(r, "uv=="+o.uvVersion)
	}
	return r
}

// rootfsLayer returns the gzipped root filesystem tarball for these inputs,
// building it with mmdebstrap (and compressing it) only when the cache has
// none: Debian minbase, the packages, and a venv at venvDir with the SDK
// installed from the downloaded wheels only.
func rootfsLayer(ctx context.Context, o options, wheelDir string, log io.Writer) (string, error) {
	names, err := filepath.Glob(filepath.Join(wheelDir, "*"))
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "v1\n%s\n%s\n%s\n%s\n", o.suite, o.mirror, packages, strings.Join(requirements(o), " "))
	for _, n := range names {
		fmt.Fprintln(h, filepath.Base(n))
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	gz, err := filepath.Abs(filepath.Join(o.cache, "rootfs-"+o.suite+"-"+key+".tar.gz"))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(gz); err == nil {
		ociimage.Logf(log, "root filesystem: cached %s", gz)
		return gz, nil
	}
	raw := strings.TrimSuffix(gz, ".gz") + ".tmp"
	defer os.Remove(raw)
	args := []string{"--variant=minbase", "--include=" + packages, "--skip=output/dev", "--format=tar",
		"--customize-hook=chroot \"$1\" python3 -m venv " + venvDir,
		"--customize-hook=mkdir -p \"$1/tmp/wheels\" && cp " + shellQuote(wheelDir) + "/*.whl \"$1/tmp/wheels/\"",
		"--customize-hook=chroot \"$1\" " + venvDir + "/bin/pip install --quiet --disable-pip-version-check --no-index --find-links /tmp/wheels " +
			strings.Join(requirements(o), " "),
		"--customize-hook=rm -rf \"$1/tmp/wheels\" \"$1\"/var/cache/apt/*.bin \"$1\"/var/lib/apt/lists/* \"$1\"/root/.cache",
		o.suite, raw}
	if o.mirror != "" {
		args = append(args, o.mirror)
	}
	ociimage.Logf(log, "root filesystem: mmdebstrap %s (a minute or two)", o.suite)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Env = pipFreeEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mmdebstrap (apt-get install mmdebstrap; it runs as root): %v\n%s", err, tail(b, 4000))
	}
	if err := gzipFile(raw, gz); err != nil {
		return "", err
	}
	return gz, nil
}

// pipFreeEnv is the environment without the host's pip settings, which
// would name paths that do not exist in the chroot.
func pipFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PIP_") {
			env = append(env, kv)
		}
	}
	return env
}

// gzipFile compresses src into dst, which appears whole.
func gzipFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		out.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
