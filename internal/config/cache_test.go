package config

import (
	"strings"
	"testing"
	"time"
)

// The cache: section: its documented defaults, and every bad value named by
// its key.
func TestCacheSection(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	want := Cache{TTL: 0, MaxEntries: 1_000_000, MaxReservationHeartbeat: 10 * time.Second, HeartbeatGraceMultiplier: 3, SweepInterval: time.Minute}
	if c.Cache != want {
		t.Errorf("cache defaults %+v, want %+v", c.Cache, want)
	}

	f := writeFile(t, t.TempDir(), "bad.yaml", `
cache:
  ttl: -1s
  maxEntries: -1
  maxReservationHeartbeat: 10ms
  heartbeatGraceMultiplier: 0
  sweepInterval: 0s
`)
	_, err = Load(Sources{Files: []string{f}})
	for _, key := range []string{"cache.ttl:", "cache.maxEntries:", "cache.maxReservationHeartbeat:", "cache.heartbeatGraceMultiplier:", "cache.sweepInterval:"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}

	ok := writeFile(t, t.TempDir(), "ok.yaml", "cache:\n  ttl: 24h\n  maxEntries: 0\n  maxReservationHeartbeat: 1s\n  crossProjectLookup: true\n")
	if c, err := Load(Sources{Files: []string{ok}}); err != nil || c.Cache.TTL != 24*time.Hour || c.Cache.MaxEntries != 0 || !c.Cache.CrossProjectLookup {
		t.Errorf("valid cache settings: %+v %v", c, err)
	}
	t.Setenv("FLYTE_MANAGER_CACHE_MAXRESERVATIONHEARTBEAT", "2s")
	if c, err := Load(Sources{}); err != nil || c.Cache.MaxReservationHeartbeat != 2*time.Second {
		t.Errorf("cache setting from the environment: %v %v", c.Cache, err)
	}
}
