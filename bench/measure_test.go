package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseVmHWM(t *testing.T) {
	const status = "Name:\tflyte-manager\nVmPeak:\t 2000000 kB\nVmHWM:\t   123456 kB\nVmRSS:\t  100000 kB\n"
	if got := parseVmHWM(strings.NewReader(status)); got != 123456*1024 {
		t.Errorf("parseVmHWM = %d, want %d", got, 123456*1024)
	}
	for _, bad := range []string{"VmRSS:\t 5 kB\n", "VmHWM:\t 5 MB\n", "VmHWM:\t x kB\n", ""} {
		if got := parseVmHWM(strings.NewReader(bad)); got != 0 {
			t.Errorf("parseVmHWM(%q) = %d, want 0", bad, got)
		}
	}
}

func TestPgKind(t *testing.T) {
	for q, want := range map[string]string{
		"BEGIN":                     kindTx,
		"commit":                    kindTx,
		"SAVEPOINT sp1":             kindTx,
		"RELEASE SAVEPOINT sp1":     kindTx,
		"ROLLBACK TO SAVEPOINT sp1": kindTx,
		"SELECT * FROM actions":     "select",
		"UPDATE resource_version SET v = v + $1 RETURNING v": "update",
		"begin_time": "other",
	} {
		if got := pgKind(q); got != want {
			t.Errorf("pgKind(%q) = %s, want %s", q, got, want)
		}
	}
}

func TestSplitInts(t *testing.T) {
	got, err := splitInts(" 100, 1000 ,10000")
	if err != nil || !slices.Equal(got, []int{100, 1000, 10000}) {
		t.Errorf("splitInts = %v, %v", got, err)
	}
	if got, err := splitInts(""); err != nil || len(got) != 0 {
		t.Errorf("splitInts(\"\") = %v, %v; want none", got, err)
	}
	for _, bad := range []string{"10,x", "0", "-5"} {
		if _, err := splitInts(bad); err == nil {
			t.Errorf("splitInts(%q) accepted", bad)
		}
	}
}

// The throughput scenario at the default sizes is also the in-flight
// curve's 100-run point: plan gives both the same key, so it runs once.
func TestPlanSharesTheThroughputPoint(t *testing.T) {
	o := options{runs: 100, fanout: 20, realRuns: 4, realFanout: 8, bigFanout: 300, warm: "both",
		backends: []string{"sqlite", "postgres"}, runners: []string{"noop", "a0"},
		scale: []int{100, 10000}, curveFanout: []int{10}, curveActions: 2000, curveInflight: []int{1, 100}, curveRuns: 20}
	specs := plan(o)
	keys := map[string][]string{}
	for _, s := range specs {
		keys[s.key()] = append(keys[s.key()], s.group)
	}
	if g := keys["sqlite/noop//100/20/100"]; !slices.Equal(g, []string{groupThroughput, groupInflight}) {
		t.Errorf("sqlite noop 100 × 20 is in %v, want the throughput table and the in-flight curve", g)
	}
	var real []string
	for _, s := range specs {
		if s.group == groupRealFanout {
			real = append(real, s.backend+" "+s.label())
		}
	}
	if !slices.Equal(real, []string{"sqlite a0 warm off", "sqlite a0 warm on"}) {
		t.Errorf("real fan-out scenarios %v, want SQLite with warm start off and on", real)
	}
	if n := len(keys["postgres/noop//1/10000/1"]); n != 1 {
		t.Errorf("postgres 10,000-child scale run planned %d times, want 1", n)
	}
	if n := len(keys["sqlite/noop//181/10/181"]); n != 1 {
		t.Errorf("fan-out curve point 10 (2000 / 11 = 181 runs) planned %d times, want 1", n)
	}
}

func TestParseStat(t *testing.T) {
	// A command with spaces and a parenthesis; utime 150, stime 50,
	// cutime 1000, cstime 230 ticks.
	line := "4242 (a0 (warm) x) S 17 4242 4242 0 -1 4194560 100 0 0 0 150 50 1000 230 20 0 3 0 100 1000 200"
	got, ok := parseStat(line)
	if !ok {
		t.Fatal("not parsed")
	}
	want := procTimes{ppid: 17, self: 2 * time.Second, child: 12300 * time.Millisecond}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, ok := parseStat("4242 (cut short"); ok {
		t.Fatal("a line without its fields was parsed")
	}
}
