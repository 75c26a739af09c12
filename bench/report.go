package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Issue 10's figures: what this machine measured before its work ("today")
// and what it asks for.
const (
	targetNoop       = 500.0 // actions/s, either database
	targetA0         = 25.0  // actions/s, either database
	targetBigFanout  = 15 * time.Second
	todayBigFanout   = 138 * time.Second // 300 real children on SQLite
	targetPeakRSS    = 300 << 20         // bytes, the 10,000-child run
	referenceRunsSec = 16.0              // the reference manager, single-action runs on PostgreSQL
)

// beforeIssue28 is what issue 28 measured on main before its work (516e1d4,
// a quiet 2-core machine): noop actions/s by backend and shape ("100x20":
// the throughput row; "1xN": one run of N children), and the 300 real
// children's wall.
var beforeIssue28 = map[string]float64{
	"sqlite/100x20": 397, "postgres/100x20": 78,
	"sqlite/1x100": 501, "sqlite/1x1000": 568, "sqlite/1x10000": 361,
	"postgres/1x100": 126, "postgres/1x1000": 85, "postgres/1x10000": 74,
}

const beforeIssue28BigFanout = 22 * time.Second

// before28 is issue 28's figure before its work for r's shape ("—": none).
func before28(r result) string {
	if v, ok := beforeIssue28[fmt.Sprintf("%s/%dx%d", r.backend, r.runs, r.fanout)]; ok && r.runner == "noop" {
		return fmt.Sprintf("%.0f", v)
	}
	return "—"
}

// today is issue 10's actions/s before its work, by backend and runner.
var today = map[string]float64{
	"sqlite/noop": 168, "postgres/noop": 108,
	"sqlite/a0": 2.4, "postgres/a0": 1.9,
}

// throughputTarget is the actions/s a result is held to and today's
// figure for it (0, 0: none).
func throughputTarget(r result) (target, was float64) {
	switch r.runner {
	case "noop":
		return targetNoop, today[r.backend+"/noop"]
	case "a0":
		if r.group == groupRealFanout {
			return 0, 0 // held to its wall time instead
		}
		return targetA0, today[r.backend+"/a0"]
	}
	return 0, 0
}

// report prints one table per group, the kube figures, the ratios and the
// summary against the targets.
func report(out io.Writer, o options, e *env, results []result, load string, took time.Duration) {
	par := fmt.Sprintf("noop %d, a0 its default (2 × CPUs)", noopParallelism)
	if o.parallelism > 0 {
		par = fmt.Sprint(o.parallelism)
	}
	fmt.Fprintf(out, "\nflyte-manager bench (%s, %d CPUs, load average before: %s, took %s; executor.local.maxParallelism: %s)\n",
		time.Now().Format(time.DateOnly), runtime.NumCPU(), load, took.Round(time.Second), par)
	pgSource := "pg_stat_statements"
	if e.pg != nil && e.pgStats == nil {
		pgSource = "not available (no pg_stat_statements library): the manager's counter only"
	}
	for _, g := range []string{groupThroughput, groupRealFanout, groupScale, groupFanout, groupInflight} {
		var rows []result
		for _, r := range results {
			if r.group == g {
				rows = append(rows, r)
			}
		}
		if len(rows) > 0 {
			fmt.Fprintf(out, "\n%s\n", g)
			table(out, g, rows)
		}
	}
	reportKube(out, results)
	reportTop(out, results, o.pgTop)
	ratios(out, o, results)
	summary(out, results)
	fmt.Fprintln(out, "\nactions = roots + children that exist after the runs (ListActions); actions/s = runs × (1 + fan-out) / wall;")
	fmt.Fprintln(out, "wall = first CreateRun sent → last root seen terminal on WatchActionDetails; p50/p99 = that per run;")
	fmt.Fprintln(out, "×today = against issue 10's figure before its work (noop: SQLite 168, PostgreSQL 108; a0: 2.4, 1.9 actions/s;")
	fmt.Fprintln(out, "300 real children: 138 s); peak RSS = the manager's VmHWM; stmts/action = the manager's")
	fmt.Fprintln(out, "flyte_manager_db_statements_total over the measured runs (transaction control not counted) / actions;")
	fmt.Fprintf(out, "pg stmts/action = %s of the run's database, BEGIN/COMMIT/SAVEPOINT included;\n", pgSource)
	fmt.Fprintln(out, "CPU per action (a0) = user + sys over the measured runs / actions, of the manager's children (the attempts'")
	fmt.Fprintln(out, "processes, the warm server and what they reaped, from /proc/<pid>/stat) and of the manager itself.")
}

// table prints one group's results.
func table(out io.Writer, group string, rows []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "backend\trunner\truns\tfan-out\tin flight\tactions\tsucceeded\twall\tactions/s\ttarget\t×today\tp50\tp99\tpeak RSS\tstmts/action\tpg stmts/action\tfailed runs\t"
	if group == groupScale {
		head += "stmts vs smallest\t"
	}
	fmt.Fprintln(tw, head)
	smallest := map[string]float64{} // scale: stmts/action of the smallest run, by backend
	for _, r := range rows {
		target, ratio := "—", "—"
		if t, was := throughputTarget(r); t > 0 {
			target = fmt.Sprintf("≥ %.0f", t)
			if was > 0 {
				ratio = fmt.Sprintf("%.2f×", r.actionsPerSec()/was)
			}
		}
		wall := round(r.wall).String()
		if r.group == groupRealFanout {
			wall += fmt.Sprintf(" (≤ %s; %s before: %.2f× as fast)", targetBigFanout, todayBigFanout, todayBigFanout.Seconds()/r.wall.Seconds())
		}
		rss := mb(r.peakRSS)
		if r.group == groupScale {
			rss += fmt.Sprintf(" (≤ %s)", mb(targetPeakRSS))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t", r.backend, r.label(), r.runs, r.fanout, r.inflight,
			r.actions, r.succeeded, wall, r.actionsPerSec(), target, ratio, round(r.p50), round(r.p99), rss,
			perActionText(r.perAction(r.stmts)), perActionText(r.perAction(r.pgStmts)), r.failedRuns)
		if group == groupScale {
			base, ok := smallest[r.backend]
			if !ok {
				base = r.perAction(r.stmts)
				smallest[r.backend] = base
			}
			flat := "—"
			if base > 0 {
				flat = fmt.Sprintf("%.2f× (flat: ≈ 1×)", r.perAction(r.stmts)/base)
			}
			fmt.Fprintf(tw, "%s\t", flat)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, r := range rows {
		if r.stmts != nil && r.measuredActions() > 0 {
			fmt.Fprintf(out, "  %s / %s, %d × (1 + %d): statements per action by kind: %s", r.backend, r.label(), r.runs, r.fanout, byKind(r.stmts, r.measuredActions()))
			if r.pgStmts != nil {
				fmt.Fprintf(out, "; pg_stat_statements: %s", byKind(r.pgStmts, r.measuredActions()))
			}
			fmt.Fprintln(out)
		}
		if r.runner == "noop" && r.measuredActions() > 0 {
			n := float64(r.measuredActions())
			per := func(d time.Duration) time.Duration { return time.Duration(float64(d) / n) }
			total := per(r.cpu.manager + r.cpu.tasks + r.cpuPG + r.cpuBench)
			fmt.Fprintf(out, "  %s / %s, %d × (1 + %d): CPU per action: manager %s, PostgreSQL %s, bench client %s; together %s, so %d CPUs run at most %.0f actions/s\n",
				r.backend, r.label(), r.runs, r.fanout, round(per(r.cpu.manager+r.cpu.tasks)), round(per(r.cpuPG)), round(per(r.cpuBench)), round(total),
				runtime.NumCPU(), float64(runtime.NumCPU())/total.Seconds())
		}
		if r.runner == "a0" && r.measuredActions() > 0 {
			n := float64(r.measuredActions())
			fmt.Fprintf(out, "  %s / %s, %d × (1 + %d): CPU per action: task processes %s, manager %s (user + sys)\n", r.backend, r.label(), r.runs, r.fanout,
				round(time.Duration(float64(r.cpu.tasks)/n)), round(time.Duration(float64(r.cpu.manager)/n)))
		}
	}
}

func perActionText(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

// byKind is "select 10.2, insert 3.0, ..." per action.
func byKind(s statements, actions int) string {
	var parts []string
	for _, k := range []string{"select", "insert", "update", "delete", "other", kindTx} {
		if v, ok := s[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, v/float64(actions)))
		}
	}
	return strings.Join(parts, ", ")
}

// mb prints bytes as MB (MiB).
func mb(b int64) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f MB", float64(b)/(1<<20))
}

// ratios compares runners and backends of the throughput table.
func ratios(out io.Writer, o options, results []result) {
	find := func(b, label string) *result {
		for i := range results {
			if results[i].group == groupThroughput && results[i].backend == b && results[i].label() == label {
				return &results[i]
			}
		}
		return nil
	}
	var labels []string
	for _, r := range results {
		if r.group == groupThroughput && !slices.Contains(labels, r.label()) {
			labels = append(labels, r.label())
		}
	}
	var lines []string
	for _, b := range o.backends {
		for _, l := range labels {
			if n, a := find(b, "noop"), find(b, l); n != nil && a != nil && l != "noop" && l != "kube" && a.actionsPerSec() > 0 {
				lines = append(lines, fmt.Sprintf("  %-8s noop/%s actions/s: %.1f×  (control plane vs. real task processes)", b, l, n.actionsPerSec()/a.actionsPerSec()))
			}
		}
	}
	for _, l := range labels {
		if s, p := find("sqlite", l), find("postgres", l); s != nil && p != nil && p.actionsPerSec() > 0 {
			lines = append(lines, fmt.Sprintf("  %-12s sqlite/postgres actions/s: %.2f×  p50 %s vs %s", l, s.actionsPerSec()/p.actionsPerSec(), round(s.p50), round(p.p50)))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintln(out, "\nratios:")
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
	}
}

// summary is the targets table: each of issue 10's and 28's figures
// measured here, its target, the figures before each issue's work and the
// ratio to issue 10's.
func summary(out io.Writer, results []result) {
	type line struct{ figure, measured, target, was, ratio, was28, met string }
	var measuredBefore []string // by line: -before's figure, measured just before
	var lines []line
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	for _, r := range results {
		n := len(lines)
		switch {
		case r.group == groupThroughput && (r.runner == "noop" || r.runner == "a0"):
			t, was := throughputTarget(r)
			v := r.actionsPerSec()
			lines = append(lines, line{fmt.Sprintf("%s %s actions/s (%d × (1 + %d))", r.backend, r.label(), r.runs, r.fanout),
				fmt.Sprintf("%.1f", v), fmt.Sprintf("≥ %.0f", t), fmt.Sprintf("%.1f", was), fmt.Sprintf("%.2f×", v/was), before28(r), yes(v >= t && r.failedRuns == 0)})
			if r.runner == "noop" {
				lines = append(lines, line{fmt.Sprintf("%s noop actions/s vs the reference's single-action runs/s", r.backend),
					fmt.Sprintf("%.1f", v), "—", fmt.Sprintf("%.0f (reference)", referenceRunsSec), fmt.Sprintf("%.1f×", v/referenceRunsSec), "—", "—"})
			}
		case r.group == groupThroughput && r.runner == "kube":
			v := r.actionsPerSec()
			lines = append(lines, line{fmt.Sprintf("%s kube single-action runs/s (%d in flight)", r.backend, r.inflight),
				fmt.Sprintf("%.1f", v), "—", fmt.Sprintf("%.0f (reference)", referenceRunsSec), fmt.Sprintf("%.2f×", v/referenceRunsSec), "—", "—"})
		case r.group == groupRealFanout:
			lines = append(lines, line{fmt.Sprintf("%s %s: one run, %d real children, wall", r.backend, r.label(), r.fanout),
				round(r.wall).String(), "≤ " + targetBigFanout.String(), todayBigFanout.String(),
				fmt.Sprintf("%.2f× as fast", todayBigFanout.Seconds()/r.wall.Seconds()), beforeIssue28BigFanout.String(), yes(r.wall <= targetBigFanout && r.failedRuns == 0)})
		case r.group == groupScale:
			v := r.actionsPerSec()
			lines = append(lines, line{fmt.Sprintf("%s noop: one run, %d children, actions/s", r.backend, r.fanout),
				fmt.Sprintf("%.1f", v), fmt.Sprintf("≥ %.0f", targetNoop), "—", "—", before28(r), yes(v >= targetNoop && r.failedRuns == 0)})
			lines = append(lines, line{fmt.Sprintf("%s noop: one run, %d children, peak RSS", r.backend, r.fanout),
				mb(r.peakRSS), "≤ " + mb(targetPeakRSS), "—", "—", "—", yes(r.peakRSS > 0 && r.peakRSS <= targetPeakRSS)})
			lines = append(lines, line{fmt.Sprintf("%s noop: one run, %d children, wall (%d of %d actions succeeded)", r.backend, r.fanout, r.succeeded, r.measuredActions()),
				round(r.wall).String(), "completes", "—", "—", "—", yes(r.failedRuns == 0 && r.succeeded == r.measuredActions())})
			lines = append(lines, line{fmt.Sprintf("%s noop: one run, %d children, statements/action", r.backend, r.fanout),
				perActionText(r.perAction(r.stmts)) + pgText(r), "flat", "—", "—", "—", "see scale table"})
		}
		for len(measuredBefore) < len(lines) {
			measuredBefore = append(measuredBefore, "—")
		}
		if b := r.before; b != nil && len(lines) > n { // the first line of a result is its actions/s or wall
			measuredBefore[n] = fmt.Sprintf("%.1f", b.actionsPerSec())
			if r.group == groupRealFanout {
				measuredBefore[n] = round(b.wall).String()
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(out, "\nsummary against the targets (issues 10 and 28):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	head := "  figure\tmeasured\ttarget\tbefore #10\tratio\tbefore #28\tmet\t"
	withBefore := slices.ContainsFunc(results, func(r result) bool { return r.before != nil })
	if withBefore {
		head += "measured before (-before)\t"
	}
	fmt.Fprintln(tw, head)
	for i, l := range lines {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t", l.figure, l.measured, l.target, l.was, l.ratio, l.was28, l.met)
		if withBefore {
			fmt.Fprintf(tw, "%s\t", measuredBefore[i])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func pgText(r result) string {
	if r.pgStmts == nil {
		return ""
	}
	return " (pg: " + perActionText(r.perAction(r.pgStmts)) + ")"
}

// reportTop prints, for each scenario measured on PostgreSQL, its n most
// frequent statements per action: where its round trips go.
func reportTop(out io.Writer, results []result, top int) {
	for _, r := range results {
		if top <= 0 || len(r.pgQueries) == 0 || r.measuredActions() == 0 {
			continue
		}
		var ms float64
		for _, q := range r.pgQueries {
			ms += q.ms
		}
		n := float64(r.measuredActions())
		fmt.Fprintf(out, "\n%s / %s, %d × (1 + %d): PostgreSQL ran statements for %.2f ms per action (%.0f%% of the wall);\n", r.backend, r.label(), r.runs, r.fanout, ms/n, ms/1e3/r.wall.Seconds()*100)
		fmt.Fprintf(out, "the %d it ran most, per action, and the mean ms of each (pg_stat_statements)\n", top)
		for _, q := range r.pgQueries[:min(top, len(r.pgQueries))] {
			text := strings.Join(strings.Fields(q.query), " ")
			if len(text) > 160 {
				text = text[:160] + "…"
			}
			fmt.Fprintf(out, "  %6.2f  %6.3f  %s\n", q.calls/n, q.ms/max(q.calls, 1), text)
		}
	}
}
