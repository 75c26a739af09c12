package local

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
)

// A build of an image with an apt layer, on a host where runc works, runs
// its mmdebstrap as root of a user namespace whose ids are the build range
// (never root on the host), and the manager installs the tarball it leaves
// as a root filesystem image; a layer that fails fails the build naming
// it. mmdebstrap is a stand-in here (the real one: e2e TestRootfsImages).
func TestRootfsBuildRunsInAUserNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root filesystem builds need a root manager")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("root filesystem images need runc on this host")
	}
	h := newHarness(t, dbtest.SQLiteDSN(t))
	envs := filepath.Join(filepath.Dir(h.workDir), "environments")
	seen := h.sharedFile("mmdebstrap.seen")
	// The stand-in: records who it runs as, fails the layer named in the
	// spec's apt packages ("fail"), else writes a tarball of one file.
	writeFile(t, filepath.Join(h.binDir, "mmdebstrap"), fmt.Sprintf(`#!/bin/sh
{ echo "uid=$(id -u) map=$(awk '{print $2}' /proc/self/uid_map | head -1)"; } >> %[1]s
for a; do out="$a"; done
case "$*" in *"apt-get install -y --no-install-recommends fail"*) echo 1 > "$(dirname "$out")/step"; exit 1;; esac
d=$(mktemp -d) && mkdir -p "$d/usr/games" && echo moo > "$d/usr/games/cowsay" && tar -C "$d" -cf "$out" .
`, seen), 0o755)
	t.Setenv("PATH", h.binDir+":"+os.Getenv("PATH"))
	writeFile(t, filepath.Join(h.binDir, "uv"), "#!/bin/sh\nexit 0\n", 0o755)
	h.driver(func(c *config.LocalExecutor) {
		c.Environments.Dir = envs
		c.Environments.UV = filepath.Join(h.binDir, "uv")
		c.Containers.Images = filepath.Join(filepath.Dir(h.workDir), "images")
	})
	apt := func(pkg string) *ib.ImageSpec {
		return &ib.ImageSpec{BaseImage: "ghcr.io/flyteorg/flyte:py3.11-v2.12.1", Layers: []*ib.Layer{
			{Layer: &ib.Layer_AptPackages{AptPackages: &ib.AptPackages{Packages: []string{pkg}}}}}}
	}
	ok := h.buildRun("rootfs-ok", apt("cowsay"), contextTarball(t, map[string]string{"x": "y"}))
	h.terminal(ok, phase.Succeeded, time.Minute)
	fqin := h.report(ok)
	key, isOurs := images.KeyOf(fqin)
	if !isOurs || !strings.Contains(fqin, "-rootfs:") {
		t.Fatalf("the build answered %q, want a root filesystem fqin", fqin)
	}
	store := images.NewStore(envs, 0, h.log)
	if m, ready := store.Ready(key); !ready || !m.Rootfs {
		t.Fatalf("the image is not a ready root filesystem: %+v", m)
	}
	if b, err := os.ReadFile(filepath.Join(store.RootfsDir(key), "usr", "games", "cowsay")); err != nil || string(b) != "moo\n" {
		t.Errorf("the root filesystem lacks the tarball's file: %q %v", b, err)
	}
	got, _ := os.ReadFile(seen)
	if want := fmt.Sprintf("uid=0 map=%d", config.DefaultRunAsFirstUID+config.DefaultRunAsCount); !strings.HasPrefix(string(got), want) {
		t.Errorf("mmdebstrap ran as %q, want %q: root of a namespace of the build range", got, want)
	}

	bad := h.buildRun("rootfs-bad", apt("fail"), contextTarball(t, map[string]string{"x": "y"}))
	h.terminal(bad, phase.Failed, time.Minute)
	atts := h.attempts(bad)
	b, err := os.ReadFile(filepath.Join(atts[len(atts)-1].OutputURI, runlayout.ErrorFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc core.ErrorDocument
	if err := proto.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if msg := doc.GetError().GetMessage(); !strings.Contains(msg, "layer 1 (apt_packages: fail)") {
		t.Errorf("the failed build says %q, want it to name layer 1", msg)
	}
}
