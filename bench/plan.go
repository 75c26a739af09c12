package main

import (
	"fmt"
	"slices"
)

// Scenario groups: each is printed as a table of its own.
const (
	groupThroughput = "throughput"
	groupRealFanout = "real fan-out"
	groupScale      = "scale: one run with N children"
	groupFanout     = "curve: actions/s against fan-out width"
	groupInflight   = "curve: actions/s against runs in flight"
)

// spec is one measured scenario: a manager of its own on a fresh database,
// runs runs of a root with fanout children, inflight of them at a time.
type spec struct {
	group           string
	backend, runner string
	runs, fanout    int
	inflight        int    // runs in flight at once; runs means all at once
	warm            string // a0 only: "on" writes executor.local.warmStart: true, "off" writes nothing
}

// label is the runner as printed: a0 scenarios say which warm start.
func (s spec) label() string {
	if s.warm != "" {
		return s.runner + " warm " + s.warm
	}
	return s.runner
}

// key identifies what a scenario measures, whatever table it is printed in,
// so that one measurement serves every table that asks for it (the
// throughput scenario is also the curves' point at its size).
func (s spec) key() string {
	return fmt.Sprintf("%s/%s/%s/%d/%d/%d", s.backend, s.runner, s.warm, s.runs, s.fanout, s.inflight)
}

// warmModes are the a0 scenarios' warm-start settings for -warm.
func warmModes(warm string) []string {
	if warm == "both" {
		return []string{"off", "on"}
	}
	return []string{warm}
}

// plan lists the scenarios the options ask for, in the order they run.
func plan(o options) []spec {
	var out []spec
	add := func(s spec) {
		if s.inflight <= 0 || s.inflight > s.runs {
			s.inflight = s.runs
		}
		out = append(out, s)
	}
	noop, a0 := slices.Contains(o.runners, "noop"), slices.Contains(o.runners, "a0")
	for _, b := range o.backends {
		for _, r := range o.runners {
			switch r {
			case "noop":
				add(spec{group: groupThroughput, backend: b, runner: r, runs: o.runs, fanout: o.fanout, inflight: o.inflight})
			case "a0":
				if o.realRuns <= 0 { // -real-runs 0: only the real fan-out
					continue
				}
				for _, w := range warmModes(o.warm) {
					add(spec{group: groupThroughput, backend: b, runner: r, runs: o.realRuns, fanout: o.realFanout, inflight: o.inflight, warm: w})
				}
			case "kube":
				add(spec{group: groupThroughput, backend: b, runner: r, runs: o.kubeRuns, inflight: o.kubeInflight})
			}
		}
	}
	// The real fan-out is measured on the embedded default only (SQLite).
	if a0 && o.bigFanout > 0 && slices.Contains(o.backends, "sqlite") {
		for _, w := range warmModes(o.warm) {
			add(spec{group: groupRealFanout, backend: "sqlite", runner: "a0", runs: 1, fanout: o.bigFanout, warm: w})
		}
	}
	if !noop {
		return out
	}
	for _, b := range o.backends {
		for _, n := range o.scale {
			add(spec{group: groupScale, backend: b, runner: "noop", runs: 1, fanout: n})
		}
	}
	for _, b := range o.backends {
		for _, w := range o.curveFanout {
			add(spec{group: groupFanout, backend: b, runner: "noop", runs: max(1, o.curveActions/(1+w)), fanout: w})
		}
	}
	for _, b := range o.backends {
		for _, k := range o.curveInflight {
			add(spec{group: groupInflight, backend: b, runner: "noop", runs: max(o.curveRuns, k), fanout: o.fanout, inflight: k})
		}
	}
	return out
}
