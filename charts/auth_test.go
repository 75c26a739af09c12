package charts

import (
	"encoding/base64"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/helmtest"
)

// rendered is what TestChartAuth reads of one render.
type rendered struct {
	core, auth string            // 000-core.yaml, and its auth part
	secret     map[string]any    // the chart Secret's stringData (nil: none)
	probes     []string          // the probes' schemes
	volumes    map[string]string // the manager's mount paths by volume name
}

func renderAuth(t *testing.T, set ...string) rendered {
	t.Helper()
	args := []string{"--set", "configuration.secrets.key=" + testKey}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	objs := mustRender(t, args...)
	var r rendered
	cm := helmtest.Find(objs, "ConfigMap", "flyte-flyte-binary-config")
	r.core, _ = cm["data"].(map[string]any)["000-core.yaml"].(string)
	if i := strings.Index(r.core, "\nauth:"); i >= 0 {
		r.auth = r.core[i:]
	}
	if sec := helmtest.Find(objs, "Secret", "flyte-flyte-binary-config-secret"); sec != nil {
		r.secret, _ = sec["stringData"].(map[string]any)
	}
	b, _ := yaml.Marshal(helmtest.Find(objs, "Deployment", "flyte-flyte-binary"))
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						LivenessProbe, ReadinessProbe struct {
							HTTPGet struct{ Scheme string } `json:"httpGet"`
						}
						VolumeMounts []struct{ Name, MountPath string } `json:"volumeMounts"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &d); err != nil || len(d.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("the Deployment: %v\n%s", err, b)
	}
	c := d.Spec.Template.Spec.Containers[0]
	r.probes = []string{c.LivenessProbe.HTTPGet.Scheme, c.ReadinessProbe.HTTPGet.Scheme}
	r.volumes = map[string]string{}
	for _, m := range c.VolumeMounts {
		r.volumes[m.Name] = m.MountPath
	}
	return r
}

// Auth from the chart (docs/install-helm.md): required by default, over TLS
// (generated, or from a Secret; off behind an Ingress unless asked), with a
// first admin API key in the chart's Secret in the SDK's FLYTE_API_KEY
// format that names the Ingress host or localhost and agrees with the
// auth.bootstrapKey the manager stores; mode off on request; no key with
// an external Secret.
func TestChartAuth(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		r := renderAuth(t)
		if !strings.Contains(r.auth, `mode: "required"`) || !strings.Contains(r.core, "tls:\n    enabled: true") {
			t.Errorf("defaults: want auth required over TLS:\n%s", r.core)
		}
		if r.probes[0] != "HTTPS" || r.probes[1] != "HTTPS" {
			t.Errorf("probes %v, want HTTPS", r.probes)
		}
		checkKey(t, r, "localhost")
	})
	t.Run("ingress", func(t *testing.T) {
		r := renderAuth(t, "ingress.create=true", "ingress.host=flyte.example.com")
		if !strings.Contains(r.core, "tls:\n    enabled: false") || r.probes[0] != "" {
			t.Errorf("behind an Ingress TLS is the Ingress's by default:\n%s (probes %v)", r.core, r.probes)
		}
		checkKey(t, r, "flyte.example.com")
		r = renderAuth(t, "ingress.create=true", "ingress.host=flyte.example.com", "configuration.tls.enabled=true", "configuration.auth.bootstrapKey.endpoint=api.example.com")
		if !strings.Contains(r.core, "tls:\n    enabled: true") || r.probes[1] != "HTTPS" {
			t.Errorf("tls.enabled true behind an Ingress:\n%s (probes %v)", r.core, r.probes)
		}
		checkKey(t, r, "api.example.com")
	})
	t.Run("tls secret", func(t *testing.T) {
		r := renderAuth(t, "configuration.tls.secretName=flyte-tls")
		if !strings.Contains(r.core, "certFile: /etc/flyte-manager/tls/tls.crt") || r.volumes["tls"] != "/etc/flyte-manager/tls" {
			t.Errorf("the TLS Secret is not mounted and configured:\n%s\n%v", r.core, r.volumes)
		}
	})
	t.Run("off", func(t *testing.T) {
		r := renderAuth(t, "configuration.auth.mode=off", "configuration.auth.bootstrapKey.enabled=false")
		if !strings.Contains(r.auth, `mode: "off"`) {
			t.Errorf("auth.mode off not rendered:\n%s", r.core)
		}
		if _, ok := r.secret["api-key"]; ok {
			t.Error("a bootstrap key with bootstrapKey.enabled false")
		}
	})
	t.Run("external secret", func(t *testing.T) {
		if r := renderAuth(t, "configuration.externalSecretRef=mine"); r.secret != nil {
			t.Error("the chart made a Secret (and a key) with externalSecretRef")
		}
	})
	t.Run("bad values", func(t *testing.T) {
		for _, set := range []string{"configuration.auth.mode=maybe", "configuration.auth.bootstrapKey.endpoint=localhost:8090", "configuration.tls.enabled=yes"} {
			leaf := set[strings.LastIndex(set[:strings.Index(set, "=")], ".")+1 : strings.Index(set, "=")]
			if _, err := render(t, "--set", set); err == nil || !strings.Contains(err.Error(), leaf) {
				t.Errorf("--set %s: %v, want an error naming %s", set, err, leaf)
			}
		}
	})
}

// checkKey checks the Secret's bootstrap key: auth.bootstrapKey is valid,
// and api-key is the same key for host in the FLYTE_API_KEY format.
func checkKey(t *testing.T, r rendered, host string) {
	t.Helper()
	file, _ := r.secret["016-auth-bootstrap.yaml"].(string)
	var f struct {
		Auth struct {
			BootstrapKey string `json:"bootstrapKey"`
		} `json:"auth"`
	}
	if err := yaml.Unmarshal([]byte(file), &f); err != nil {
		t.Fatal(err)
	}
	id, secret, err := config.ParseBootstrapKey(f.Auth.BootstrapKey)
	if err != nil {
		t.Fatalf("auth.bootstrapKey %q: %v", f.Auth.BootstrapKey, err)
	}
	enc, _ := r.secret["api-key"].(string)
	dec, err := base64.StdEncoding.DecodeString(enc)
	if want := host + ":" + id + ":" + secret + ":None"; err != nil || string(dec) != want {
		t.Errorf("api-key decodes to %q, want %q", dec, want)
	}
	if strings.Contains(r.core, secret) {
		t.Error("the key's secret is in the ConfigMap")
	}
}
