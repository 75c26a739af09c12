package config

import (
	"slices"
	"strings"
	"testing"
)

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.5": true, "::1": true, "[::1]": true, "0:0:0:0:0:0:0:1": true,
		"localhost": true, "LOCALHOST": true, "localhost.": true, "api.localhost": true,
		"": false, "0.0.0.0": false, "::": false, "[::]": false, "192.168.1.5": false, "10.0.0.1": false,
		"fe80::1": false, "flyte.example.com": false, "localhost.example.com": false, "my-laptop": false,
		"::ffff:127.0.0.1": true, // an IPv4-mapped loopback address
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// auth.mode auto is off while every listener is on loopback and required
// as soon as one reaches beyond it; an explicit mode is kept.
func TestAuthModeResolution(t *testing.T) {
	isolate(t)
	for name, tc := range map[string]struct {
		overrides map[string]any
		required  bool
		exposed   []string // AuthOffButExposed
	}{
		"embedded default":        {nil, false, nil},
		"ipv4 loopback":           {map[string]any{"server.host": "127.0.0.2"}, false, nil},
		"ipv6 loopback":           {map[string]any{"server.host": "::1"}, false, nil},
		"localhost":               {map[string]any{"server.host": "localhost"}, false, nil},
		"all interfaces v4":       {map[string]any{"server.host": "0.0.0.0"}, true, nil},
		"all interfaces v6":       {map[string]any{"server.host": "::"}, true, nil},
		"empty host":              {map[string]any{"server.host": ""}, true, nil},
		"a host name":             {map[string]any{"server.host": "flyte.example.com"}, true, nil},
		"an address":              {map[string]any{"server.host": "192.168.1.5"}, true, nil},
		"apps port exposed":       {map[string]any{"apps.listen": "0.0.0.0:30081"}, true, nil},
		"apps port on loopback":   {map[string]any{"apps.listen": "127.0.0.1:30081"}, false, nil},
		"kube API exposed":        {map[string]any{"kubeAPI.enabled": true, "kubeAPI.listen": ":8091"}, true, nil},
		"kube API off":            {map[string]any{"kubeAPI.enabled": false, "kubeAPI.listen": ":8091"}, false, nil},
		"s3 endpoint exposed":     {map[string]any{"storage.s3Endpoint.listen": "[::]:8092"}, true, nil},
		"s3 endpoint, s3 storage": {map[string]any{"storage.s3Endpoint.listen": "[::]:8092", "storage.url": "s3://b"}, false, nil},
		"console local exposed":   {map[string]any{"console.localListen": "0.0.0.0:8080"}, true, nil},
		"explicit off, loopback":  {map[string]any{"auth.mode": "off"}, false, nil},
		"explicit off, exposed": {map[string]any{"auth.mode": "off", "server.host": "0.0.0.0", "apps.listen": "0.0.0.0:30081"},
			false, []string{"0.0.0.0:8090", "0.0.0.0:30081"}},
		"explicit required, loopback": {map[string]any{"auth.mode": "required"}, true, nil},
	} {
		t.Run(name, func(t *testing.T) {
			o := map[string]any{"home": t.TempDir()}
			for k, v := range tc.overrides {
				o[k] = v
			}
			c, err := Load(Sources{Overrides: o})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Auth.Required(); got != tc.required {
				t.Errorf("Required() = %v (mode %q, effective %q, listeners %v), want %v", got, c.Auth.Mode, c.Auth.Effective, c.Listeners(), tc.required)
			}
			if got := c.AuthOffButExposed(); !slices.Equal(got, tc.exposed) {
				t.Errorf("AuthOffButExposed() = %v, want %v", got, tc.exposed)
			}
		})
	}
}

// A configuration changed in code after Load is resolved again by Prepare,
// by what it finally listens on.
func TestAuthModeResolvedAgainByPrepare(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{Overrides: map[string]any{"home": t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.Mode != AuthAuto || c.Auth.Required() {
		t.Fatalf("the default is mode %q, required %v; want auto, off on loopback", c.Auth.Mode, c.Auth.Required())
	}
	c.Server.Host = "0.0.0.0"
	if err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	if !c.Auth.Required() {
		t.Error("auto stayed off after the API moved to 0.0.0.0")
	}
	// An unresolved Auth (built in code) is required only when it says so.
	if (Auth{Mode: AuthAuto}).Required() || !(Auth{Mode: AuthRequired}).Required() {
		t.Error("an unresolved Auth reads its mode wrong")
	}
}

// An identity provider with auth.mode auto turns auth on, even on loopback;
// with an explicit off it is refused; an unknown mode is refused.
func TestAuthModeAutoWithOIDC(t *testing.T) {
	isolate(t)
	oidc := map[string]any{"home": t.TempDir(), "auth.oidc.issuer": "https://idp.example.com",
		"auth.oidc.audiences": []string{"flyte"}, "auth.oidc.clientId": "flyte-cli"}
	c, err := Load(Sources{Overrides: oidc})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Auth.Required() {
		t.Error("auth.oidc.issuer with auth.mode auto left auth off")
	}
	oidc["auth.mode"] = "off"
	if _, err := Load(Sources{Overrides: oidc}); err == nil {
		t.Error("auth.oidc.issuer with auth.mode off was accepted")
	}
	if _, err := Load(Sources{Overrides: map[string]any{"home": t.TempDir(), "auth.mode": "sometimes"}}); err == nil {
		t.Error("auth.mode sometimes was accepted")
	}
}

// auth.bootstrapKey is checked at load and redacted when printed.
func TestAuthBootstrapKey(t *testing.T) {
	isolate(t)
	const key = "fmk0123456789abcdef:abcdefghijklmnopqrstuvwxyz0123456789"
	c, err := Load(Sources{Overrides: map[string]any{"home": t.TempDir(), "auth.bootstrapKey": key}})
	if err != nil {
		t.Fatal(err)
	}
	if id, secret, err := ParseBootstrapKey(c.Auth.BootstrapKey); err != nil || id != "fmk0123456789abcdef" || secret != "abcdefghijklmnopqrstuvwxyz0123456789" {
		t.Errorf("parsed %q %q %v", id, secret, err)
	}
	if y, err := c.YAML(); err != nil || strings.Contains(string(y), "abcdefghijklmnop") {
		t.Errorf("the printed configuration shows the bootstrap key: %v\n%s", err, y)
	}
	for _, bad := range []string{"fmk0123456789abcdef", "xyz0123456789abcdef:abcdefghijklmnopqrstuvwxyz0123456789", "fmk0123456789abcdef:short"} {
		if _, err := Load(Sources{Overrides: map[string]any{"home": t.TempDir(), "auth.bootstrapKey": bad}}); err == nil || !strings.Contains(err.Error(), "auth.bootstrapKey") {
			t.Errorf("auth.bootstrapKey %q: %v", bad, err)
		}
	}
}
