package main

// What the fuzz harness observes besides the answers: the state digest
// (every table's rows, every file under the data directory) and the
// server's log of finished calls and internal errors.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// stateDigest is the database and storage state: every table's rows and
// every file under the data directory except the database's own files.
type stateDigest struct {
	hashes map[string]string   // "table t" or "file path" -> hash
	rows   map[string][]string // table -> its rows, rendered and sorted, for the report
}

func (m *fuzzManager) takeDigest(ctx context.Context) (*stateDigest, error) {
	out := &stateDigest{hashes: map[string]string{}, rows: map[string][]string{}}
	sqlDB, err := m.db.DB()
	if err != nil {
		return nil, err
	}
	// sqlite_sequence is left out: it holds the surrogate-key counters,
	// which an INSERT ... ON CONFLICT DO NOTHING that inserts nothing still
	// advances (as PostgreSQL sequences do, outside any transaction, and
	// they are not tables); no procedure exposes them.
	list := `SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'sqlite_sequence' ORDER BY name`
	if m.postgres {
		list = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	var tables []string
	if err := m.db.WithContext(ctx).Raw(list).Scan(&tables).Error; err != nil {
		return nil, err
	}
	for _, table := range tables {
		lines, err := tableRows(ctx, sqlDB, table)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", table, err)
		}
		out.rows[table] = lines
		out.hashes["table "+table] = fmt.Sprintf("%d rows %s", len(lines), hashOf(strings.Join(lines, "\n")))
	}
	err = filepath.WalkDir(m.home, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(m.home, path)
		if e.IsDir() || strings.HasPrefix(rel, "flyte-manager.db") { // SQLite's own files
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out.hashes["file "+rel] = hashOf(string(data))
		return nil
	})
	return out, err
}

// tableRows renders every row of table, sorted: row order is not state.
func tableRows(ctx context.Context, sqlDB *sql.DB, table string) ([]string, error) {
	rows, err := sqlDB.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		lines = append(lines, fmt.Sprintf("%q", vals))
	}
	slices.Sort(lines)
	return lines, rows.Err()
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// diffDigest says what differs between two digests, or "".
func diffDigest(before, after *stateDigest) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(after.hashes)) {
		w, ok := before.hashes[k]
		switch {
		case !ok:
			diffs = append(diffs, "new "+k)
		case w != after.hashes[k]:
			d := "changed " + k
			if table, isTable := strings.CutPrefix(k, "table "); isTable {
				d += rowDiff(before.rows[table], after.rows[table])
			}
			diffs = append(diffs, d)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before.hashes)) {
		if _, ok := after.hashes[k]; !ok {
			diffs = append(diffs, "removed "+k)
		}
	}
	return strings.Join(diffs, "; ")
}

// rowDiff shows a few rows that one side has and the other has not.
func rowDiff(before, after []string) string {
	var gone, added []string
	for _, r := range before {
		if _, found := slices.BinarySearch(after, r); !found {
			gone = append(gone, firstLine(r, 300))
		}
	}
	for _, r := range after {
		if _, found := slices.BinarySearch(before, r); !found {
			added = append(added, firstLine(r, 300))
		}
	}
	return fmt.Sprintf(" (-%v +%v)", gone[:min(len(gone), 3)], added[:min(len(added), 3)])
}

// serverLog is the server's slog handler in the harness: it keeps, by
// request id, the calls the server finished and the internal errors it
// logged (a panic becomes one too), and drops everything else.
type serverLog struct {
	mu       sync.Mutex
	changed  chan struct{}     // closed and replaced on every record kept
	internal map[string]string // request id -> error text
	finished map[string]string // request id -> code
}

func slogLogger(l *serverLog) *slog.Logger { return slog.New(&logHandler{log: l}) }

func (l *serverLog) internalError(id string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	text, ok := l.internal[id]
	return text, ok
}

// waitFinished waits until the server logged the call id, or timeout passed.
func (l *serverLog) waitFinished(id string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		_, done := l.finished[id]
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

func (l *serverLog) keep(msg string, attrs map[string]string) {
	id := attrs["request_id"]
	if id == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch msg {
	case "internal error":
		l.internal[id] = attrs["procedure"] + ": " + attrs["error"]
	case "rpc":
		l.finished[id] = attrs["code"]
	default:
		return
	}
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

type logHandler struct {
	log   *serverLog
	attrs []slog.Attr
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "internal error" && r.Message != "rpc" {
		return nil
	}
	attrs := map[string]string{}
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	h.log.keep(r.Message, attrs)
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{log: h.log, attrs: append(slices.Clip(h.attrs), attrs...)}
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }
