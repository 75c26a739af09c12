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
