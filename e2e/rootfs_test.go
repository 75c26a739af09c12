package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRootfsImages: on a host where raw containers run in runc, an image
// with apt_packages and commands layers (the SDK's remote builder) becomes
// a Debian root filesystem, built by mmdebstrap in a user namespace of its
// own, and the task runs in it (in runc, as its leased uid): it sees the
// apt package, the file its commands layer made, its pip layer. An image
// whose apt package does not exist fails its build naming the layer.
// Opt-in (FM_TEST_ROOTFS=1): the first build downloads Debian and takes
// minutes.
func TestRootfsImages(t *testing.T) {
	if os.Getenv("FM_TEST_ROOTFS") != "1" {
		t.Skip("set FM_TEST_ROOTFS=1 to build Debian root filesystem images (minutes: mmdebstrap downloads Debian)")
	}
	if os.Geteuid() != 0 {
		t.Skip("root filesystem images run in runc, which needs a root manager")
	}
	for _, bin := range []string{"runc", "mmdebstrap"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("root filesystem images need %s on this host", bin)
		}
	}
	ctx := scenarioContext(t, 20*time.Minute)
	m := startSDKManager(t, backends[0].dsn(t), uvCacheEnv(t))
	type outcome struct {
		Run, Phase, Error, BuildRun string
		Output                      map[string]string
	}
	var res struct{ Apt, Bad outcome }
	driver(t, ctx, &res, "drive_rootfs.py", sdkEndpoint(m))
	if res.Apt.Phase != "SUCCEEDED" {
		t.Fatalf("the apt image's task: run %s (build run %s) is %s: %s", res.Apt.Run, res.Apt.BuildRun, res.Apt.Phase, res.Apt.Error)
	}
	out := res.Apt.Output
	if !strings.Contains(out["cowsay"], "< moo >") || out["made"] != "made-by-commands" || out["humanize"] != "4.9.0" ||
		out["prefix"] != "/opt/venv" || out["uid"] == "0" || out["os"] == "" {
		t.Errorf("the task did not run in its image: %v", out)
	}
	if res.Bad.Phase != "BUILD_FAILED" || !strings.Contains(res.Bad.Error, "layer 1 (apt_packages: fm-no-such-package)") {
		t.Errorf("the bad apt image: %s (build run %s) with %q, want its build failed naming layer 1", res.Bad.Phase, res.Bad.BuildRun, res.Bad.Error)
	}
	if !strings.Contains(m.output.String(), "image environment built") {
		t.Error("the manager logged no build")
	}
	if _, err := os.Stat(filepath.Join(m.Home, "environments")); err != nil {
		t.Error(err)
	}
}
