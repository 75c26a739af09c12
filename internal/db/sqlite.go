package db

import (
	"database/sql"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/migrator"
	"gorm.io/gorm/schema"
	sqlitedrv "modernc.org/sqlite" // the pure-Go SQLite driver
)

// sqliteDialector teaches gorm the SQLite dialect over modernc.org/sqlite.
// We keep our own because that driver can keep compiled statements (about a
// third of the manager's CPU went into recompiling SQL with the fork the
// stock dialector ships; stmtcache.go keeps them per connection), and because our schema comes from SQL migrations,
// so gorm only needs to build queries: no AutoMigrate type mapping.
type sqliteDialector struct{ dsn string }

func (sqliteDialector) Name() string { return SQLite }

func (d sqliteDialector) Initialize(g *gorm.DB) error {
	connector, err := sqlitedrv.NewConnector(d.dsn)
	if err != nil {
		return err
	}
	g.ConnPool = sql.OpenDB(stmtCacheConnector{connector}) // see stmtcache.go
	// SQLite ≥ 3.35 has RETURNING, which gorm uses to read generated keys.
	callbacks.RegisterDefaultCallbacks(g, &callbacks.Config{
		CreateClauses:        []string{"INSERT", "VALUES", "ON CONFLICT", "RETURNING"},
		UpdateClauses:        []string{"UPDATE", "SET", "FROM", "WHERE", "RETURNING"},
		DeleteClauses:        []string{"DELETE", "FROM", "WHERE", "RETURNING"},
		LastInsertIDReversed: true,
	})
	// SQLite has no row locks: a FOR UPDATE clause is dropped, the write
	// lock of an immediate transaction already serializes writers.
	g.ClauseBuilders["FOR"] = func(c clause.Clause, b clause.Builder) {
		if _, ok := c.Expression.(clause.Locking); !ok {
			c.Build(b)
		}
	}
	return nil
}

func (d sqliteDialector) Migrator(g *gorm.DB) gorm.Migrator {
	return migrator.Migrator{Config: migrator.Config{DB: g, Dialector: d}}
}

// DataTypeOf maps Go fields to SQLite's storage classes (only gorm's own
// schema helpers use it; our tables come from migrations).
func (sqliteDialector) DataTypeOf(f *schema.Field) string {
	switch f.DataType {
	case schema.Bool, schema.Int, schema.Uint:
		return "integer"
	case schema.Float:
		return "real"
	case schema.String:
		return "text"
	case schema.Time:
		return "datetime"
	case schema.Bytes:
		return "blob"
	}
	return string(f.DataType)
}

func (sqliteDialector) DefaultValueOf(*schema.Field) clause.Expression {
	return clause.Expr{SQL: "NULL"}
}

func (sqliteDialector) BindVarTo(w clause.Writer, _ *gorm.Statement, _ any) { _ = w.WriteByte('?') }

// QuoteTo quotes each part of a dotted identifier with backticks.
func (sqliteDialector) QuoteTo(w clause.Writer, ident string) {
	for i, part := range strings.Split(ident, ".") {
		if i > 0 {
			_ = w.WriteByte('.')
		}
		_ = w.WriteByte('`')
		_, _ = w.WriteString(strings.ReplaceAll(part, "`", "``"))
		_ = w.WriteByte('`')
	}
}

func (sqliteDialector) Explain(sql string, vars ...any) string {
	return logger.ExplainSQL(sql, nil, `"`, vars...)
}

// SavePoint and RollbackTo let WithTx nest (gorm uses savepoints inside a
// transaction).
func (sqliteDialector) SavePoint(tx *gorm.DB, name string) error {
	return tx.Exec("SAVEPOINT " + name).Error
}

func (sqliteDialector) RollbackTo(tx *gorm.DB, name string) error {
	return tx.Exec("ROLLBACK TO SAVEPOINT " + name).Error
}
