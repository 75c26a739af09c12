package config

import (
	"strings"
	"testing"
	"time"
)

// The retention: section: its defaults, rules matched first to last with
// wildcards, forever and 0, bad values named by their key, and a value from
// the environment.
func TestRetentionSection(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Retention
	if r.Default != "720h" || len(r.Rules) != 0 || r.InputGrace != 24*time.Hour || r.Interval != time.Hour || r.BatchSize != 100 || r.DiskCap != 0 {
		t.Errorf("retention defaults %+v", r)
	}
	if d, forever := r.Keep("p", "development"); d != 720*time.Hour || forever {
		t.Errorf("default Keep = %s, %v", d, forever)
	}

	f := writeFile(t, t.TempDir(), "rules.yaml", `
retention:
  default: forever
  rules:
    - {project: "ml-*", domain: production, keep: 0}
    - {project: "ml-*", keep: 48h}
    - {domain: staging, keep: 1h}
`)
	c, err = Load(Sources{Files: []string{f}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		project, domain string
		d               time.Duration
		forever         bool
	}{
		{"ml-a", "production", 0, true},
		{"ml-a", "development", 48 * time.Hour, false},
		{"ml-a", "staging", 48 * time.Hour, false}, // the first match wins
		{"web", "staging", time.Hour, false},
		{"web", "development", 0, true},
	} {
		if d, forever := c.Retention.Keep(tc.project, tc.domain); d != tc.d || forever != tc.forever {
			t.Errorf("Keep(%s, %s) = %s, %v; want %s, %v", tc.project, tc.domain, d, forever, tc.d, tc.forever)
		}
	}

	bad := writeFile(t, t.TempDir(), "bad.yaml", `
retention:
  default: soon
  rules:
    - {project: "[", keep: -1h}
  inputGrace: 1s
  interval: 10ms
  batchSize: 0
  batchPause: -1s
  diskCap: -1
`)
	_, err = Load(Sources{Files: []string{bad}})
	for _, key := range []string{"retention.default:", "retention.rules[0].keep:", "retention.rules[0].project:", "retention.inputGrace:",
		"retention.interval:", "retention.batchSize:", "retention.batchPause:", "retention.diskCap:"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}

	t.Setenv("FLYTE_MANAGER_RETENTION_DEFAULT", "1s")
	if c, err := Load(Sources{}); err != nil || c.Retention.Default != "1s" {
		t.Errorf("retention.default from the environment: %+v %v", c.Retention, err)
	}
}
