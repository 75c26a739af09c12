// Package helmtest runs helm for tests: $FM_HELM when set, else bin/helm,
// which `make helm` builds from its Go module (tools/helm) when it is not
// there yet.
package helmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"fmgr.dev/internal/sdktest"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Binary is the helm to run. Without $FM_HELM it runs `make helm` once per
// test binary (quick when bin/helm is current) and fails the test when
// that fails.
func Binary(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("FM_HELM"); h != "" {
		return h
	}
	buildOnce.Do(func() {
		root := sdktest.RepoRoot()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "make", "-C", root, "--no-print-directory", "helm").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("make helm: %v\n%s", err, out)
			return
		}
		built = filepath.Join(root, "bin", "helm")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// Run runs helm with args and its own empty config, cache and data
// directories, and returns its standard output; a failure returns an error
// carrying standard error.
func Run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// Object is one rendered manifest.
type Object map[string]any

// Kind is the object's kind.
func (o Object) Kind() string { s, _ := o["kind"].(string); return s }

// Name is the object's metadata.name.
func (o Object) Name() string {
	m, _ := o["metadata"].(map[string]any)
	s, _ := m["name"].(string)
	return s
}

// Split parses a multi-document YAML stream (helm template's output) into
// its objects, skipping empty documents.
func Split(t testing.TB, manifests string) []Object {
	t.Helper()
	var objs []Object
	for _, doc := range strings.Split("\n"+manifests, "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var o Object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("a rendered document is not YAML: %v\n%s", err, doc)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// Find is the object of that kind and name, or nil.
func Find(objs []Object, kind, name string) Object {
	for _, o := range objs {
		if o.Kind() == kind && o.Name() == name {
			return o
		}
	}
	return nil
}
