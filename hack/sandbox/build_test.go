package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"fmgr.dev/hack/internal/ociimage"
)

// The image's config starts `flyte-manager sandbox` under tini with the
// SDK's venv for tasks and first on PATH, and exposes the contract's ports;
// its creation time is the epoch given. (TestSandbox runs the real image.)
func TestImageConfig(t *testing.T) {
	var files ociimage.Files
	files.Dir("etc/", 0o755, 0)
	layer, err := files.Layer(time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	o := options{suite: "bookworm", sdkVersion: "2.12.1", version: "v1", revision: "abc", epoch: time.Unix(1700000000, 0).UTC()}
	img, err := imageOf(o, &v1.Platform{OS: "linux", Architecture: "amd64"}, layer, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	args := append(append([]string{}, c.Entrypoint...), c.Cmd...)
	if want := []string{"/usr/bin/tini", "--", binaryPath, "sandbox", "--python", "/opt/flyte/bin"}; !slices.Equal(args, want) {
		t.Errorf("entrypoint and cmd %q, want %q", args, want)
	}
	if !slices.ContainsFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=/opt/flyte/bin:") }) {
		t.Errorf("env %q: the venv is not first on PATH", c.Env)
	}
	for _, p := range []string{"30080/tcp", "6443/tcp", "30002/tcp", "30081/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed: %v", p, c.ExposedPorts)
		}
	}
	if !cf.Created.Time.Equal(o.epoch) || cf.Architecture != "amd64" || c.Labels["org.opencontainers.image.revision"] != "abc" {
		t.Errorf("created %s, arch %s, labels %v", cf.Created.Time, cf.Architecture, c.Labels)
	}
}
