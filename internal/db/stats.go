package db

import (
	"errors"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"gorm.io/gorm"
)

// Statement kinds, the values of the kind label of
// flyte_manager_db_statements_total.
const (
	KindSelect = "select"
	KindInsert = "insert"
	KindUpdate = "update"
	KindDelete = "delete"
	KindOther  = "other"
)

// statementKinds is the order of the counters in a statementCounter.
var statementKinds = [...]string{KindSelect, KindInsert, KindUpdate, KindDelete, KindOther}

// statementCounterName is the counter's name among the gorm plugins of a DB.
const statementCounterName = "fmgr:statements"

// statementCounter counts the SQL statements the manager sends through gorm,
// by kind. SQLite has no pg_stat_statements, and "how many statements does
// an action cost" is the question the bench asks of both databases, so the
// count is the manager's own. Transaction control (BEGIN, COMMIT, SAVEPOINT)
// does not pass through gorm's callbacks and is not counted.
type statementCounter struct {
	counts [len(statementKinds)]atomic.Uint64
	// errors counts the statements the database refused or that failed
	// on the way (a query that found no row is not an error here).
	errors [len(statementKinds)]atomic.Uint64
}

func (*statementCounter) Name() string { return statementCounterName }

// Initialize hooks count after every gorm callback chain that sends SQL:
// Create, Query, Update and Delete for the model API, Row and Raw for
// Raw().Scan/Row(s) and Exec.
func (c *statementCounter) Initialize(db *gorm.DB) error {
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("*").Register(statementCounterName, c.count),
		cb.Query().After("*").Register(statementCounterName, c.count),
		cb.Update().After("*").Register(statementCounterName, c.count),
		cb.Delete().After("*").Register(statementCounterName, c.count),
		cb.Row().After("*").Register(statementCounterName, c.count),
		cb.Raw().After("*").Register(statementCounterName, c.count),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// count runs at the end of a callback chain, which gorm runs to the end
// even after an error: a statement that was built was sent, failed or not
// (a chain that failed before building one leaves the SQL empty).
func (c *statementCounter) count(tx *gorm.DB) {
	if tx.DryRun || tx.Statement.SQL.Len() == 0 {
		return
	}
	c.add(tx.Statement.SQL.String(), tx.Error != nil && !errors.Is(tx.Error, gorm.ErrRecordNotFound))
}

// add counts one statement sql that was sent, and whether it failed.
func (c *statementCounter) add(sql string, failed bool) {
	kind := StatementKind(sql)
	for i, k := range statementKinds {
		if k == kind {
			c.counts[i].Add(1)
			if failed {
				c.errors[i].Add(1)
			}
			return
		}
	}
}

// StatementCounts is how many statements db has sent, by kind (every kind
// present, zeros included). Nil when db was not opened by Open.
func StatementCounts(db *gorm.DB) map[string]uint64 {
	c := counterOf(db)
	if c == nil {
		return nil
	}
	out := make(map[string]uint64, len(statementKinds))
	for i, k := range statementKinds {
		out[k] = c.counts[i].Load()
	}
	return out
}

// StatementTotal is how many statements db has sent, all kinds together
// (0 when db was not opened by Open). Tests take it before and after a call
// to see what the call costs.
func StatementTotal(db *gorm.DB) uint64 {
	var n uint64
	for _, v := range StatementCounts(db) {
		n += v
	}
	return n
}

func counterOf(db *gorm.DB) *statementCounter {
	c, _ := db.Config.Plugins[statementCounterName].(*statementCounter)
	return c
}

var statementsDesc = prometheus.NewDesc("flyte_manager_db_statements_total",
	"SQL statements the manager sent to its database, by kind (select, insert, update, delete, other); transaction control is not counted.",
	[]string{"kind"}, nil)

var statementErrorsDesc = prometheus.NewDesc("flyte_manager_db_errors_total",
	"SQL statements that failed (the database refused them, or the connection failed), by kind; a query that finds no row is not counted.",
	[]string{"kind"}, nil)

// statementCollector exposes a DB's statement counts to Prometheus.
type statementCollector struct{ c *statementCounter }

// StatementCollector is the Prometheus collector of
// flyte_manager_db_statements_total for db (opened by Open).
func StatementCollector(db *gorm.DB) prometheus.Collector {
	c := counterOf(db)
	if c == nil {
		c = &statementCounter{} // a DB from elsewhere: nothing is counted
	}
	return statementCollector{c}
}

func (statementCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- statementsDesc
	ch <- statementErrorsDesc
}

func (s statementCollector) Collect(ch chan<- prometheus.Metric) {
	for i, k := range statementKinds {
		ch <- prometheus.MustNewConstMetric(statementsDesc, prometheus.CounterValue, float64(s.c.counts[i].Load()), k)
		ch <- prometheus.MustNewConstMetric(statementErrorsDesc, prometheus.CounterValue, float64(s.c.errors[i].Load()), k)
	}
}

// StatementKind classifies one SQL statement by its verb: select, insert,
// update, delete, or other (DDL, PRAGMA, transaction control, ...). A
// statement that starts with WITH is classified by the verb that follows
// its common table expressions.
func StatementKind(sql string) string {
	word, rest := firstWord(sql)
	if word == "with" {
		word = verbAfterCTEs(rest)
	}
	switch word {
	case "select", "values":
		return KindSelect
	case "insert":
		return KindInsert
	case "update":
		return KindUpdate
	case "delete":
		return KindDelete
	}
	return KindOther
}

// firstWord is the first keyword of s, lower-cased, skipping blanks,
// opening parentheses and comments, and what follows it.
func firstWord(s string) (string, string) {
	for {
		s = strings.TrimLeft(s, " \t\r\n(")
		switch {
		case strings.HasPrefix(s, "--"):
			_, s, _ = strings.Cut(s, "\n")
			continue
		case strings.HasPrefix(s, "/*"):
			_, s, _ = strings.Cut(s, "*/")
			continue
		}
		break
	}
	end := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_')
	})
	if end < 0 {
		end = len(s)
	}
	return strings.ToLower(s[:end]), s[end:]
}

// verbAfterCTEs finds, in what follows WITH, the first select, insert,
// update or delete outside parentheses and quotes: the statement's own verb.
func verbAfterCTEs(s string) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '\'' || c == '"':
			if j := strings.IndexByte(s[i+1:], c); j >= 0 {
				i += j + 1
			}
		case depth == 0 && isWordStart(s, i):
			w, _ := firstWord(s[i:])
			switch w {
			case "select", "insert", "update", "delete":
				return w
			}
			i += len(w) - 1
		}
	}
	return ""
}

func isWordStart(s string, i int) bool {
	c := s[i] | 0x20
	if c < 'a' || c > 'z' {
		return false
	}
	if i == 0 {
		return true
	}
	p := s[i-1] | 0x20
	return !(p >= 'a' && p <= 'z' || s[i-1] == '_' || s[i-1] >= '0' && s[i-1] <= '9')
}

// PoolCollector exposes db's connection pool (go_sql_* with db_name
// "flyte_manager": connections open, in use and idle, the pool's limit, and
// the waits for a free connection that say it is saturated).
func PoolCollector(db *gorm.DB) (prometheus.Collector, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	return collectors.NewDBStatsCollector(sqlDB, "flyte_manager"), nil
}
