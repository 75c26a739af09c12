package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
)

// peakRSS is process pid's peak resident set size in bytes (VmHWM in
// /proc/<pid>/status), 0 if it cannot be read.
func peakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseVmHWM(f)
}

// parseVmHWM reads the VmHWM line ("VmHWM:   12345 kB") of a
// /proc/<pid>/status.
func parseVmHWM(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := vmHWM(sc.Text()); ok {
			return v
		}
	}
	return 0
}

func vmHWM(line string) (int64, bool) {
	rest, ok := strings.CutPrefix(line, "VmHWM:")
	if !ok {
		return 0, false
	}
	f := strings.Fields(rest)
	if len(f) != 2 || f[1] != "kB" {
		return 0, false
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return kb * 1024, true
}

// statements is a count of SQL statements by kind (internal/db's kinds;
// from pg_stat_statements also "tx", transaction control).
type statements map[string]float64

const kindTx = "tx"

func (s statements) total() float64 { return total(s) }

// minus is s − before, kind by kind.
func (s statements) minus(before statements) statements {
	d := statements{}
	for k, v := range s {
		d[k] = v - before[k]
	}
	return d
}

// managerStatements reads the manager's flyte_manager_db_statements_total.
// Each scrape also runs the queue gauges' query (internal/queues), so a
// window between two scrapes counts one or two selects that are not the
// runs'.
func managerStatements(ctx context.Context, m *manager) (statements, error) {
	text, err := getText(ctx, m.URL+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("the manager's /metrics: %w", err)
	}
	s := statements(sumSamples(text, "flyte_manager_db_statements_total", func(l map[string]string) (string, bool) {
		return l["kind"], true
	}))
	if len(s) == 0 {
		return nil, fmt.Errorf("the manager's /metrics has no flyte_manager_db_statements_total (a manager older than the bench?)")
	}
	return s, nil
}

// statStatements reads pg_stat_statements of one database on pg. It is a
// connection to the server's postgres database, where the extension is
// created; reading through it adds nothing to the measured database.
type statStatements struct {
	conn *pgx.Conn
}

// openStatStatements creates the extension on pg (started with
// pgtest.Options.StatStatements). Nil, nil when pg does not preload it.
func openStatStatements(ctx context.Context, pg *pgtest.Server) (*statStatements, error) {
	if pg == nil || !pg.StatStatements() {
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("CREATE EXTENSION pg_stat_statements: %w", err)
	}
	return &statStatements{conn: conn}, nil
}

func (p *statStatements) Close() { p.conn.Close(context.Background()) }

// reset forgets every statement counted so far, on every database.
func (p *statStatements) reset(ctx context.Context) error {
	_, err := p.conn.Exec(ctx, "SELECT pg_stat_statements_reset()")
	return err
}

// queryCalls is one normalized statement of pg_stat_statements, how often
// it ran and the time PostgreSQL spent running it (planning and executing,
// not waiting for the client), in milliseconds.
type queryCalls struct {
	query string
	calls float64
	ms    float64
}

// read is database dbName's statements since the last reset, by kind, and
// each statement's own count, most frequent first.
func (p *statStatements) read(ctx context.Context, dbName string) (statements, []queryCalls, error) {
	rows, err := p.conn.Query(ctx, `SELECT s.query, s.calls, s.total_plan_time + s.total_exec_time FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`, dbName)
	if err != nil {
		return nil, nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	defer rows.Close()
	out := statements{}
	var each []queryCalls
	for rows.Next() {
		var query string
		var calls int64
		var ms float64
		if err := rows.Scan(&query, &calls, &ms); err != nil {
			return nil, nil, err
		}
		out[pgKind(query)] += float64(calls)
		each = append(each, queryCalls{query: query, calls: float64(calls), ms: ms})
	}
	slices.SortFunc(each, func(a, b queryCalls) int { return cmp.Compare(b.calls, a.calls) })
	return out, each, rows.Err()
}

// pgKind is db.StatementKind, with transaction control (which the
// manager's own counter does not see) apart.
func pgKind(query string) string {
	switch w, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(query)), " "); strings.TrimRight(w, ";") {
	case "begin", "commit", "rollback", "savepoint", "release", "start", "end":
		return kindTx
	}
	return db.StatementKind(query)
}
