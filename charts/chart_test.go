// Package charts tests the Helm chart in flyte-binary/ with helm built from
// its Go module (internal/helmtest): lint and render per example values
// file, every rendered configuration accepted by the manager, the rendered
// objects accepted by a real API server, misspelt values refused by name,
// and an upgrade that changes the configuration rolling the Pods.
package charts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"fmgr.dev/internal/helmtest"
	"fmgr.dev/internal/mgrproc"
)

const chart = "flyte-binary"

// tracingHeader is the tracing variant's exporter header value: a secret.
const tracingHeader = "s3cret-trace-key"

// A fixed secrets key, so that renders compare (without one the chart
// generates a key per render).
const testKey = "8iNMBtE4k7/Vq3Ynh3ZeRYbHqkRJg7CqRS3FXexXG0A="

// variant is one way of installing the chart: an example values file and
// more --set values.
type variant struct {
	name   string
	values string // examples/<values>.yaml, "" for the defaults alone
	set    []string
}

var variants = []variant{
	{name: "defaults"},
	{name: "laptop", values: "laptop"},
	{name: "production", values: "production"},
	{name: "per-project", set: []string{"configuration.executor.namespacePerProject=true", "configuration.executor.serviceAccount=flyte-task"}},
	{name: "external-secret", values: "production", set: []string{"configuration.externalSecretRef=my-flyte-secret", "configuration.database.postgres.password="}},
	{name: "tracing", set: []string{"configuration.tracing.enabled=true", "configuration.tracing.endpoint=http://otel-collector.monitoring:4318",
		"configuration.tracing.headers=x-api-key=" + tracingHeader, "configuration.tracing.sampleRatio=0.25", "configuration.tracing.resourceAttributes=deployment.environment=prod"}},
	{name: "ingress-plain", set: []string{"ingress.create=true", "ingress.host=flyte.local", "service.type=NodePort", "service.nodePorts.http=30080"}},
	{name: "auth-off", set: []string{"configuration.auth.mode=off", "configuration.tls.enabled=false", "configuration.auth.bootstrapKey.enabled=false"}},
	{name: "oidc-tls-secret", set: []string{"configuration.tls.secretName=flyte-tls", "configuration.auth.oidc.issuer=https://idp.example.com",
		"configuration.auth.oidc.audiences[0]=flyte", "configuration.auth.oidc.clientId=flyte-cli",
		"configuration.auth.bindings[0].group=ml", "configuration.auth.bindings[0].role=contributor"}},
}

func (v variant) args() []string {
	var a []string
	if v.values != "" {
		a = append(a, "-f", filepath.Join(chart, "examples", v.values+".yaml"))
	}
	for _, s := range append([]string{"configuration.secrets.key=" + testKey}, v.set...) {
		a = append(a, "--set", s)
	}
	return a
}

// render is `helm template` of the chart as release "flyte" in namespace
// "flyte".
func render(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return helmtest.Run(t, append([]string{"template", "flyte", chart, "--namespace", "flyte"}, args...)...)
}

func mustRender(t *testing.T, args ...string) []helmtest.Object {
	t.Helper()
	out, err := render(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return helmtest.Split(t, out)
}

func TestChartLint(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if out, err := helmtest.Run(t, append([]string{"lint", "--strict", chart}, v.args()...)...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// Every configuration the chart renders (the ConfigMap's files, then the
// Secret's) is what `flyte-manager config` accepts: no unknown key, no
// invalid value. Secrets are only ever in the Secret.
func TestChartConfigAccepted(t *testing.T) {
	bin := managerBinary(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			objs := mustRender(t, v.args()...)
			cm := helmtest.Find(objs, "ConfigMap", "flyte-flyte-binary-config")
			if cm == nil {
				t.Fatal("no ConfigMap flyte-flyte-binary-config")
			}
			dir := t.TempDir()
			for _, f := range writeData(t, dir, cm["data"]) {
				b, _ := os.ReadFile(f)
				for _, secret := range []string{"change-me", "miniostorage", testKey, tracingHeader} {
					if strings.Contains(string(b), secret) {
						t.Errorf("%s (in the ConfigMap) holds a secret: %s", filepath.Base(f), b)
					}
				}
			}
			if sec := helmtest.Find(objs, "Secret", "flyte-flyte-binary-config-secret"); sec != nil {
				writeData(t, dir, sec["stringData"])
			}
			// The Deployment's own --config glob, over the projected directory.
			cmd := exec.Command(bin, "config", "--home", t.TempDir(), "--config", filepath.Join(dir, "*.yaml"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("flyte-manager config refuses the rendered configuration: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "type: kubernetes") {
				t.Errorf("the effective configuration is not in kubernetes mode:\n%s", out)
			}
		})
	}
}

// writeData writes a ConfigMap's data or a Secret's stringData into dir and
// returns the .yaml files among them.
func writeData(t *testing.T, dir string, data any) []string {
	t.Helper()
	m, _ := data.(map[string]any)
	var files []string
	for k, v := range m {
		p := filepath.Join(dir, k)
		if err := os.WriteFile(p, []byte(v.(string)), 0o600); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(k, ".yaml") {
			files = append(files, p)
		}
	}
	sort.Strings(files)
	return files
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// managerBinary builds flyte-manager once for the package's tests.
func managerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fm-charts-")
		if err != nil {
			buildErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		built, buildErr = mgrproc.Build(ctx, filepath.Join(dir, "flyte-manager"))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// A misspelt key fails, naming it, wherever it is.
func TestChartMisspeltValue(t *testing.T) {
	for _, set := range []string{"deployment.replica=2", "configuration.database.postgres.hostname=db", "ingres.create=true",
		"configuration.storage.providerConfig.s3.acessKey=x"} {
		key := strings.Split(set, "=")[0]
		leaf := key[strings.LastIndex(key, ".")+1:]
		_, err := render(t, "--set", set)
		if err == nil || !strings.Contains(err.Error(), leaf) {
			t.Errorf("--set %s: %v, want an error naming %q", set, err, leaf)
		}
	}
	// A value of the wrong kind too.
	if _, err := render(t, "--set", "configuration.storage.provider=gcs"); err == nil || !strings.Contains(err.Error(), "provider") {
		t.Errorf("provider gcs: %v, want an error naming provider", err)
	}
	// Replicas cannot share SQLite.
	if _, err := render(t, "--set", "deployment.replicas=2"); err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Errorf("two replicas on SQLite: %v, want an error saying PostgreSQL is needed", err)
	}
}

// The RBAC the chart grants is the generated one: the Role of
// executor/config/rbac in the executor's namespace, or the namespace per
// project ClusterRole; never both.
func TestChartRBAC(t *testing.T) {
	for _, c := range []struct {
		set, kind, generated string
	}{
		{"", "Role", "../executor/config/rbac/role.yaml"},
		{"configuration.executor.namespacePerProject=true", "ClusterRole", "../executor/config/rbac-per-project/role.yaml"},
	} {
		args := []string{"--set", "configuration.secrets.key=" + testKey}
		if c.set != "" {
			args = append(args, "--set", c.set)
		}
		objs := mustRender(t, args...)
		var roles []helmtest.Object
		for _, o := range objs {
			if o.Kind() == "Role" || o.Kind() == "ClusterRole" {
				roles = append(roles, o)
			}
		}
		if len(roles) != 1 || roles[0].Kind() != c.kind {
			t.Fatalf("%s: rendered roles %v, want one %s", c.set, roles, c.kind)
		}
		b, err := os.ReadFile(c.generated)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(roles[0]["rules"], want["rules"]) {
			t.Errorf("%s: the chart's rules differ from %s (run make -C executor manifests):\n%v", c.kind, c.generated, roles[0]["rules"])
		}
	}
}

// The Ingress routes the public services and the console, never the
// procedures only tasks call.
func TestChartIngress(t *testing.T) {
	objs := mustRender(t, "-f", filepath.Join(chart, "examples", "production.yaml"), "--set", "configuration.secrets.key="+testKey)
	ing := helmtest.Find(objs, "Ingress", "flyte-flyte-binary-http")
	if ing == nil {
		t.Fatal("no Ingress")
	}
	b, _ := yaml.Marshal(ing)
	s := string(b)
	for _, want := range []string{"/flyteidl2.workflow.RunService/", "/flyteidl2.dataproxy.DataProxyService/", "/v2", "/blobs/", "secretName: flyte-example-com-tls"} {
		if !strings.Contains(s, want) {
			t.Errorf("the Ingress lacks %s", want)
		}
	}
	for _, internal := range []string{"ActionsService", "QueueService", "StateService", "EventsProxyService", "CacheService", "InternalRunService", "/metrics"} {
		if strings.Contains(s, internal) {
			t.Errorf("the Ingress routes %s", internal)
		}
	}
	cm := helmtest.Find(objs, "ConfigMap", "flyte-flyte-binary-config")
	if core, _ := cm["data"].(map[string]any)["000-core.yaml"].(string); !strings.Contains(core, `externalURL: "https://flyte.example.com"`) {
		t.Errorf("the external URL is not the Ingress's:\n%s", core)
	}
}
