package config

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// Retention configures the collector of ended runs and of unreferenced
// stored data (docs/retention.md).
type Retention struct {
	// Default is how long an ended run is kept when no rule matches: a
	// duration ("720h"), or "0" / "forever" to keep runs forever.
	Default string `mapstructure:"default" yaml:"default"`
	// Rules override Default per project and domain; the first that
	// matches wins. Project and domain are path.Match patterns ("*", "dev*").
	Rules []RetentionRule `mapstructure:"rules" yaml:"rules"`
	// InputGrace is how long content-addressed run inputs that no run or
	// trigger references are kept (a CreateRun that lost its insert race,
	// an upload never used) before they are collected.
	InputGrace time.Duration `mapstructure:"inputGrace" yaml:"inputGrace"`
	// Interval is how often the executor lease holder collects; 0 turns the
	// periodic collector off (`flyte-manager gc` still works).
	Interval time.Duration `mapstructure:"interval" yaml:"interval"`
	// BatchSize is how many runs one batch deletes; BatchPause is the pause
	// between batches, so that collecting never holds the database long.
	BatchSize  int           `mapstructure:"batchSize" yaml:"batchSize"`
	BatchPause time.Duration `mapstructure:"batchPause" yaml:"batchPause"`
	// Notice is how long the periodic collector only reports, from its
	// first pass on a database, before it deletes anything: upgrading to a
	// manager with a retention warns (in its log) before the first old run
	// goes. 0: no notice. `flyte-manager gc` does not wait for it.
	Notice time.Duration `mapstructure:"notice" yaml:"notice"`
	// DiskCap bounds, in bytes, what attempt directories (and their logs)
	// may take in executor.local.workDir; /readyz reports the use in its
	// detail once it passes 90%. 0: no cap.
	DiskCap int64 `mapstructure:"diskCap" yaml:"diskCap"`
}

// RetentionRule is a retention for the projects and domains it matches.
type RetentionRule struct {
	Project string `mapstructure:"project" yaml:"project"`
	Domain  string `mapstructure:"domain" yaml:"domain"`
	// Keep: a duration, or "0" / "forever".
	Keep string `mapstructure:"keep" yaml:"keep"`
}

// ParseKeep reads a retention: a positive duration, or "0" / "forever"
// (forever is true, d is 0).
func ParseKeep(s string) (d time.Duration, forever bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "0", "forever":
		return 0, true, nil
	case "":
		return 0, false, fmt.Errorf("is empty (want a duration such as 720h, or forever)")
	}
	d, err = time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("%q is not a positive duration such as 720h, nor 0 or forever", s)
	}
	return d, false, nil
}

// Keep returns the retention of project/domain: the first matching rule's,
// else the default. The configuration must have been validated.
func (r Retention) Keep(project, domain string) (d time.Duration, forever bool) {
	for _, rule := range r.Rules {
		if match(rule.Project, project) && match(rule.Domain, domain) {
			d, forever, _ = ParseKeep(rule.Keep)
			return d, forever
		}
	}
	d, forever, _ = ParseKeep(r.Default)
	return d, forever
}

// match is path.Match with an empty pattern matching everything.
func match(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

// validateRetention checks the retention: section.
func (c *Config) validateRetention(bad func(key, format string, args ...any)) {
	r := c.Retention
	if _, _, err := ParseKeep(r.Default); err != nil {
		bad("retention.default", "%v", err)
	}
	for i, rule := range r.Rules {
		key := fmt.Sprintf("retention.rules[%d]", i)
		if _, _, err := ParseKeep(rule.Keep); err != nil {
			bad(key+".keep", "%v", err)
		}
		for what, p := range map[string]string{"project": rule.Project, "domain": rule.Domain} {
			if _, err := path.Match(p, ""); err != nil {
				bad(key+"."+what, "%q is not a valid pattern", p)
			}
		}
	}
	if r.InputGrace < time.Minute {
		bad("retention.inputGrace", "must be at least 1m, got %s", r.InputGrace)
	}
	if r.Interval != 0 && r.Interval < time.Second {
		bad("retention.interval", "must be 0 (off) or at least 1s, got %s", r.Interval)
	}
	if r.BatchSize < 1 || r.BatchSize > 10000 {
		bad("retention.batchSize", "must be between 1 and 10000, got %d", r.BatchSize)
	}
	if r.BatchPause < 0 || r.BatchPause > time.Minute {
		bad("retention.batchPause", "must be between 0 and 1m, got %s", r.BatchPause)
	}
	if r.Notice < 0 {
		bad("retention.notice", "must not be negative (0: no notice), got %s", r.Notice)
	}
	if r.DiskCap < 0 {
		bad("retention.diskCap", "must not be negative (0: no cap), got %d", r.DiskCap)
	}
}
