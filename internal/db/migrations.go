package db

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

// The migration history: one ordered list for both dialects. A file is
// named NNNN_name.sql; once released it is frozen, and changes go into a
// new file. Each file is a text/template so the few type names that differ
// between PostgreSQL and SQLite are spelled once (see dialectTypes).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int64
	name    string
	tmpl    *template.Template
}

// dialectTypes fills the migration templates.
type dialectTypes struct {
	ID    string // surrogate primary key, never reused
	Bytes string
	Time  string
	Now   string // literal: the moment the migration runs
	// Postgres guards what only PostgreSQL has ({{if .Postgres}}): the
	// trigger that notifies other replicas of changes (0009).
	Postgres bool
}

func typesFor(dialect string) dialectTypes {
	now := "'" + Now().Format("2006-01-02 15:04:05.999999-07:00") + "'"
	if dialect == Postgres {
		return dialectTypes{ID: "BIGSERIAL PRIMARY KEY", Bytes: "BYTEA", Time: "TIMESTAMPTZ", Now: now, Postgres: true}
	}
	// SQLite: AUTOINCREMENT keeps ids of deleted rows from coming back (keyset
	// tokens hold ids); DATETIME is the declared type the driver parses back
	// into time.Time.
	return dialectTypes{ID: "INTEGER PRIMARY KEY AUTOINCREMENT", Bytes: "BLOB", Time: "DATETIME", Now: now}
}

var migrations = mustLoadMigrations()

func mustLoadMigrations() []migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	var out []migration
	for _, e := range entries {
		stem, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok {
			continue
		}
		num, name, ok := strings.Cut(stem, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			panic(fmt.Sprintf("migration file %q: want NNNN_name.sql", e.Name()))
		}
		text, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		t := template.Must(template.New(e.Name()).Option("missingkey=error").Parse(string(text)))
		out = append(out, migration{version: v, name: name, tmpl: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != int64(i+1) {
			panic(fmt.Sprintf("migration versions must be 1..n without gaps; found %d at position %d", m.version, i+1))
		}
	}
	return out
}

// LatestVersion is the schema version this binary expects.
func LatestVersion() int64 {
	return migrations[len(migrations)-1].version
}

// statements renders m for dialect and splits it into single statements
// (both drivers run one statement per Exec). A statement ends with ';' at
// the end of a line; lines starting with "--" are comments.
func (m migration) statements(dialect string) ([]string, error) {
	var buf bytes.Buffer
	if err := m.tmpl.Execute(&buf, typesFor(dialect)); err != nil {
		return nil, fmt.Errorf("render migration %d: %w", m.version, err)
	}
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(buf.String()) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		return nil, fmt.Errorf("migration %d: statement without a closing ';': %.40q", m.version, rest)
	}
	return out, nil
}
