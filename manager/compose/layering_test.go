package compose

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The composition is the one package allowed to import every layer, so the
// rule about who may import whom lives beside it. It is read from the code's
// own imports (production files; tests may reach across layers to build
// their fixtures):
//
//   - internal/ (the shared libraries every service stands on) imports no
//     service and no executor package;
//   - a service imports no other service;
//   - the executor imports no service (its binaries under executor/cmd
//     compose, like manager/, and are exempt);
//   - kubeapi imports no service and of the executor only its API types.
const module = "fmgr.dev"

// services are the top-level service packages (and their subpackages).
var services = []string{"actions", "app", "cache", "console", "dataproxy", "events", "imagebuilder", "runs", "secret", "trigger"}

func serviceOf(pkg string) string {
	for _, s := range services {
		if pkg == s || strings.HasPrefix(pkg, s+"/") {
			return s
		}
	}
	return ""
}

func isExecutor(pkg string) bool {
	return (pkg == "executor" || strings.HasPrefix(pkg, "executor/")) && !strings.HasPrefix(pkg, "executor/cmd/")
}

// layerViolation says why pkg may not import dep ("" when it may); both are
// module-relative package paths.
func layerViolation(pkg, dep string) string {
	depService := serviceOf(dep)
	depExecutor := dep == "executor" || strings.HasPrefix(dep, "executor/")
	switch {
	case strings.HasPrefix(pkg, "internal/") && depService != "":
		return "internal/ imports a service"
	case strings.HasPrefix(pkg, "internal/") && depExecutor:
		return "internal/ imports the executor"
	case serviceOf(pkg) != "" && depService != "" && depService != serviceOf(pkg):
		return "a service imports another service"
	case isExecutor(pkg) && depService != "":
		return "the executor imports a service"
	case (pkg == "kubeapi" || strings.HasPrefix(pkg, "kubeapi/")) && depService != "":
		return "the Kubernetes-style API imports a service"
	case (pkg == "kubeapi" || strings.HasPrefix(pkg, "kubeapi/")) && depExecutor && dep != "executor/api/v1":
		return "the Kubernetes-style API imports the executor beyond its API types"
	}
	return ""
}

// productionImports maps each package of the module (module-relative path)
// to the module packages its non-test files import.
func productionImports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			name := d.Name()
			// gen/go is its own module; the others hold no module code.
			if rel == "gen" || rel == "third_party" || rel == "tools" || name == "testdata" || name == "node_modules" ||
				(strings.HasPrefix(name, ".") && rel != ".") || rel == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if dep, ok := strings.CutPrefix(path, module+"/"); ok {
				if out[pkg] == nil {
					out[pkg] = map[string]bool{}
				}
				out[pkg][dep] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLayering(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	imports := productionImports(t, root)
	// The walk must have seen every kind of package, or the rule checks nothing.
	for _, want := range []string{"internal/runstate", "runs", "executor/attempt", "manager/compose"} {
		if len(imports[want]) == 0 {
			t.Fatalf("found no imports of %s under %s: the walk is wrong", want, root)
		}
	}
	var bad []string
	for pkg, deps := range imports {
		for dep := range deps {
			if why := layerViolation(pkg, dep); why != "" {
				bad = append(bad, pkg+" → "+dep+": "+why)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// The rule itself, on the imports that broke it before the composition moved
// out of internal/.
func TestLayerViolation(t *testing.T) {
	cases := []struct {
		pkg, dep string
		bad      bool
	}{
		{"internal/app", "runs", true},
		{"internal/app", "executor/local", true},
		{"internal/runstate", "executor/contract", true},
		{"internal/runstate", "internal/runlayout", false},
		{"runs", "cache", true},
		{"runs", "runs/launchform", false},
		{"cache", "executor/attempt", false},
		{"executor/kube", "secret", true},
		{"executor/cmd/manager", "manager/compose", false},
		{"manager/compose", "runs", false},
	}
	for _, c := range cases {
		if got := layerViolation(c.pkg, c.dep) != ""; got != c.bad {
			t.Errorf("%s → %s: violation %v, want %v", c.pkg, c.dep, got, c.bad)
		}
	}
}
