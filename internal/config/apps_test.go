package config

import (
	"strings"
	"testing"
)

// Apps are served under /apps unless configured otherwise; a prefix that
// is not a path (or is the console's) and a public URL that names no app
// are refused, naming the key.
func TestAppsConfig(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Apps.PathPrefix != "/apps" || c.Apps.PublicURL != "" || c.Apps.Network != "auto" {
		t.Fatalf("defaults: %+v", c.Apps)
	}
	dir := t.TempDir()
	c, err = Load(Sources{Files: []string{writeFile(t, dir, "ok.yaml", "apps:\n  pathPrefix: /served/apps\n  publicURL: https://apps.example.com/{project}/{domain}/{name}/\n")}})
	if err != nil || c.Apps.PathPrefix != "/served/apps" {
		t.Fatalf("a good apps section: %+v, %v", c.Apps, err)
	}
	for name, yaml := range map[string]string{
		"apps.pathPrefix": "apps:\n  pathPrefix: apps/\n",
		"console's path":  "apps:\n  pathPrefix: /v2\n",
		"apps.publicURL":  "apps:\n  publicURL: https://apps.example.com/\n",
		"apps.network":    "apps:\n  network: bridge\n",
	} {
		_, err := Load(Sources{Files: []string{writeFile(t, dir, "bad.yaml", yaml)}})
		if err == nil || !strings.Contains(err.Error(), "apps.") {
			t.Errorf("%s: err = %v, want one naming the key", name, err)
		}
	}
}
