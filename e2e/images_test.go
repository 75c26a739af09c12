package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// uvCacheEnv points uv's download cache at the repository's .cache, so that
// reruns of the images scenario download nothing from PyPI.
func uvCacheEnv(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "uv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return "UV_CACHE_DIR=" + dir
}

// TestImages: with the SDK's remote builder (image.builder: remote), tasks
// whose images add a package the manager's environment lacks run
// unmodified (with_pip_packages, with_requirements): the manager builds each
// image once as a Python environment
// (the built-in build-image task of system/production) and runs the task's
// attempts with its interpreter. Two images pinning conflicting versions of
// the package run side by side; a second SDK process running the same
// image builds nothing (GetImage finds it); an image with an apt layer
// fails its build, the build run's error naming the layer.
func TestImages(t *testing.T) {
	ctx := scenarioContext(t, 15*time.Minute)
	// Without the container runtime, as where runc does not work: an apt
	// layer fails its build (TestRootfsImages builds it in runc).
	m := startSDKManager(t, backends[0].dsn(t), uvCacheEnv(t), "FLYTE_MANAGER_EXECUTOR_LOCAL_CONTAINERS_RUNTIME=off")

	type outcome struct {
		Run, Phase, Error, BuildRun string
		Output                      map[string]string
	}
	var res struct{ New, Old, Req, Apt outcome }
	driver(t, ctx, &res, "drive_images.py", sdkEndpoint(m), "all")
	envs := filepath.Join(m.Home, "environments") + "/"
	check := func(name string, o outcome, version string) {
		t.Helper()
		if o.Phase != "SUCCEEDED" {
			t.Fatalf("%s: run %s is %s: %s", name, o.Run, o.Phase, o.Error)
		}
		if o.Output["humanize"] != version || o.Output["words"] != "1.2 million" {
			t.Errorf("%s: the task saw humanize %q (%q), want %s", name, o.Output["humanize"], o.Output["words"], version)
		}
		if !strings.HasPrefix(o.Output["prefix"], envs) {
			t.Errorf("%s: the task ran in %s, not in an environment under %s", name, o.Output["prefix"], envs)
		}
	}
	check("humanize 4.9.0", res.New, "4.9.0")
	check("humanize 4.8.0", res.Old, "4.8.0")
	check("requirements file", res.Req, "4.7.0")
	if res.New.Output["prefix"] == res.Old.Output["prefix"] {
		t.Errorf("both versions ran in one environment, %s", res.New.Output["prefix"])
	}
	if res.Apt.Phase != "BUILD_FAILED" || !strings.Contains(res.Apt.Error, "layer 1 (apt_packages: cowsay)") {
		t.Errorf("the apt image: %s (build run %s) with %q, want its build failed naming layer 1 (apt_packages: cowsay)",
			res.Apt.Phase, res.Apt.BuildRun, res.Apt.Error)
	}
	// The environments are read-only to everyone: attempts, later builds
	// (whose uv ran as an attempt's user, into a staging directory of its
	// own, and the manager moved the result in).
	readOnlyEnvs(t, envs)
	built := strings.Count(m.output.String(), "image environment built")
	if built != 3 {
		t.Errorf("the manager built %d environments, want 3 (one per image that can be built)", built)
	}
	// A build's log is its run's log, layer by layer.
	buildOf := regexp.MustCompile(`image environment built.* image=(\S+) .*run=(\S+)`)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	matches := buildOf.FindAllStringSubmatch(m.output.String(), -1)
	if len(matches) != built {
		t.Errorf("%d of the %d builds' log lines name their run", len(matches), built)
	}
	for _, match := range matches {
		logs := mustFlyte(t, ctx, dir, "get", "logs", match[2])
		if !strings.Contains(logs, "== layer 1: ") || !strings.Contains(logs, "built") {
			t.Errorf("flyte get logs %s (the build of %s) does not show the build's layers:\n%s", match[2], match[1], logs)
		}
	}

	var again struct{ New outcome }
	driver(t, ctx, &again, "drive_images.py", sdkEndpoint(m), "again")
	check("humanize 4.9.0 again", again.New, "4.9.0")
	if again.New.Output["prefix"] != res.New.Output["prefix"] {
		t.Errorf("the second run of the same image ran in %s, the first in %s", again.New.Output["prefix"], res.New.Output["prefix"])
	}
	if n := strings.Count(m.output.String(), "image environment built"); n != built {
		t.Errorf("the second run of the same image built it again (%d builds, were %d)", n, built)
	}
}

// readOnlyEnvs checks that nothing in the environments of envs/ (but
// links) has a write bit.
func readOnlyEnvs(t *testing.T, envs string) {
	t.Helper()
	root := filepath.Join(envs, "envs") // the manager's: it moves environments in
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable (%v)", path, info.Mode())
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
