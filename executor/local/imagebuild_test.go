package local

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// buildRun creates a run of the built-in build-image task for spec.
func (h *harness) buildRun(name string, spec *ib.ImageSpec, tarball []byte) store.ActionKey {
	h.t.Helper()
	b, err := proto.Marshal(spec)
	if err != nil {
		h.t.Fatal(err)
	}
	key := "test-inputs/" + name + "/spec.pb"
	if err := h.blobs.Put(h.ctx, key, b, nil); err != nil {
		h.t.Fatal(err)
	}
	if err := h.blobs.Put(h.ctx, "test-inputs/"+name+"/context.tgz", tarball, nil); err != nil {
		h.t.Fatal(err)
	}
	str := func(n, v string) *task.NamedLiteral {
		return &task.NamedLiteral{Name: n, Value: &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{
			Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: v}}}}}}}
	}
	_, err = h.state.CreateRun(h.ctx, &workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Project: "p", Domain: "development", Name: name}},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: images.TaskSpec()},
		InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{Literals: []*task.NamedLiteral{
			str(images.InputSpec, h.blobs.URI(key)), str(images.InputTarget, "img:1"),
			str(images.InputContext, h.blobs.URI("test-inputs/"+name+"/context.tgz"))}}},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return store.RunKey{Project: "p", Domain: "development", RunName: name}.Action(store.RootName)
}

// As root, an image build (whose packages' builds run arbitrary code)
// runs as a uid of the attempts' range, never root; two builds of one spec
// at once build once (the second says in its log that it waits); the
// environment they answer with is root's and nobody's to write.
func TestImageBuildsRunAsTheAttemptsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a manager running as root runs builds as other users")
	}
	h := newHarness(t, dbtest.SQLiteDSN(t))
	envs := filepath.Join(filepath.Dir(h.workDir), "environments")
	calls, gate := h.sharedFile("uv.calls"), h.sharedFile("gate")
	// The fake uv records who runs it; creating the environment it waits
	// for the test's gate, and leaves its uid in it; installing a
	// requirements file it writes beside it (as a project's build writes
	// into its source): the context is the build's.
	writeFile(t, filepath.Join(h.binDir, "uv"), fmt.Sprintf(`#!/bin/sh
echo "$1 $(id -u)" >> %[1]s
if [ "$1" = venv ]; then
  for env; do :; done
  while [ ! -e %[2]s ]; do sleep 0.05; done
  mkdir -p "$env/bin" && : > "$env/bin/python" && chmod 755 "$env/bin/python" && id -u > "$env/built-by"
fi
for a; do case "$a" in */req.txt) touch "${a%%/req.txt}/build-output" || echo "context not writable" >> %[1]s;; esac; done
`, calls, gate), 0o755)
	h.driver(func(c *config.LocalExecutor) {
		c.Environments.Dir = envs
		c.Environments.UV = filepath.Join(h.binDir, "uv")
	})
	spec := &ib.ImageSpec{BaseImage: "ghcr.io/flyteorg/flyte:py3.11-v2.12.1", Layers: []*ib.Layer{
		{Layer: &ib.Layer_Requirements{Requirements: &ib.Requirements{File: "req.txt"}}}}}
	ctx := contextTarball(t, map[string]string{"req.txt": "humanize\n"})
	a, b := h.buildRun("build-a", spec, ctx), h.buildRun("build-b", spec, ctx)
	// One build makes the environment, the other waits for it.
	testkit.Eventually(t, "one build creating the environment and the other waiting", time.Minute, func() bool {
		got, _ := os.ReadFile(calls)
		waiting := 0
		for _, k := range []store.ActionKey{a, b} {
			if lines, err := os.ReadFile(h.logPath(k, 1)); err == nil && strings.Contains(string(lines), "waiting for it") {
				waiting++
			}
		}
		return strings.Count(string(got), "venv") == 1 && waiting == 1
	})
	writeFile(t, gate, "", 0o644)
	h.terminal(a, phase.Succeeded, time.Minute)
	h.terminal(b, phase.Succeeded, time.Minute)

	got, _ := os.ReadFile(calls)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "venv ") {
		t.Fatalf("uv ran for %q, want one build's venv and two installs", lines)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		uid, err := strconv.ParseUint(f[len(f)-1], 10, 32)
		if err != nil || uid == 0 || uid < config.DefaultRunAsFirstUID || uid >= config.DefaultRunAsFirstUID+config.DefaultRunAsCount {
			t.Errorf("uv %s ran as uid %s, want one of the attempts' range", f[0], f[len(f)-1])
		}
	}
	key, err := images.Key(spec, images.ContextDigest(ctx))
	if err != nil {
		t.Fatal(err)
	}
	env := images.NewStore(envs, 0, h.log).EnvDir(key)
	if by, err := os.ReadFile(filepath.Join(env, "built-by")); err != nil || strings.TrimSpace(string(by)) == "0" {
		t.Errorf("the environment was built by uid %q (%v)", by, err)
	}
	err = filepath.WalkDir(env, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != 0 || info.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s: uid %d, mode %v; want root's and read-only", path, st.Uid, info.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(envs, "staging"))
	if len(entries) != 0 {
		t.Errorf("staging directories left: %v", entries)
	}
}

// contextTarball is a build context: a gzipped tarball of files.
func contextTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
