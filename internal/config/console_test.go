package config

import (
	"strings"
	"testing"
)

// The console's second listener opens only where the SDK's links need it:
// embedded mode on the SDK's local port, the console on, an address set.
func TestConsoleLocalListen(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ConsoleLocalListen(); got != "127.0.0.1:8080" {
		t.Fatalf("default ConsoleLocalListen = %q, want 127.0.0.1:8080", got)
	}
	for name, mutate := range map[string]func(*Config){
		"console off":        func(c *Config) { c.Console.Enabled = false },
		"listener off":       func(c *Config) { c.Console.LocalListen = "" },
		"kubernetes":         func(c *Config) { c.Executor.Type = ExecutorKubernetes },
		"another api port":   func(c *Config) { c.Server.Port = 9000 },
		"a port picked free": func(c *Config) { c.Server.Port = 0 },
	} {
		cc := *c
		mutate(&cc)
		if got := cc.ConsoleLocalListen(); got != "" {
			t.Errorf("%s: ConsoleLocalListen = %q, want none", name, got)
		}
	}
}

func TestConsoleConfigFromFile(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	c, err := Load(Sources{Files: []string{writeFile(t, dir, "c.yaml", "console:\n  enabled: true\n  localListen: \"127.0.0.1:18080\"\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ConsoleLocalListen(); got != "127.0.0.1:18080" {
		t.Errorf("ConsoleLocalListen = %q", got)
	}
	_, err = Load(Sources{Files: []string{writeFile(t, dir, "bad.yaml", "console:\n  localListen: \"8080\"\n")}})
	if err == nil || !strings.Contains(err.Error(), "console.localListen") {
		t.Errorf("a port without a host: err = %v, want one naming console.localListen", err)
	}
	_, err = Load(Sources{Files: []string{writeFile(t, dir, "typo.yaml", "console:\n  localListn: \"x:1\"\n")}})
	if err == nil || !strings.Contains(err.Error(), "localListn") {
		t.Errorf("an unknown console key: err = %v, want it named", err)
	}
}

// console.app names the app that serves /v2: project/domain/name, from a
// file or the environment; anything else is refused naming the key.
func TestConsoleApp(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	c, err := Load(Sources{Files: []string{writeFile(t, dir, "c.yaml", "console:\n  app: flytesnacks/development/ui\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if p, d, n, ok := c.ConsoleApp(); !ok || p != "flytesnacks" || d != "development" || n != "ui" {
		t.Errorf("ConsoleApp() = %q %q %q %v", p, d, n, ok)
	}
	if _, _, _, ok := (&Config{}).ConsoleApp(); ok {
		t.Error("no console.app reads as one")
	}
	for _, bad := range []string{"ui", "p/ui", "p//ui", "p/d/ui/x", "/d/ui"} {
		_, err := Load(Sources{Files: []string{writeFile(t, dir, "bad.yaml", "console:\n  app: \""+bad+"\"\n")}})
		if err == nil || !strings.Contains(err.Error(), "console.app") {
			t.Errorf("console.app %q: err = %v, want one naming console.app", bad, err)
		}
	}
	t.Setenv("FLYTE_MANAGER_CONSOLE_APP", "p/d/from-env")
	c, err = Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n, ok := c.ConsoleApp(); !ok || n != "from-env" {
		t.Errorf("console.app from the environment: %q %v", n, ok)
	}
}
