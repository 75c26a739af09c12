package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
)

// migrationLockKey names the PostgreSQL advisory lock that serializes
// migrations across processes (an arbitrary constant: "fmgr" in ASCII).
const migrationLockKey int64 = 0x666d6772

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    BIGINT PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at %s NOT NULL
)`

// Migrate applies the pending migrations in order, each in its own
// transaction. Several processes may call it at once: on PostgreSQL they
// queue on a session advisory lock held on one pinned connection; on SQLite
// each migration's BEGIN IMMEDIATE takes the database write lock, and the
// "already applied?" check runs under it. Versions in the database that
// this binary does not know (a newer binary migrated first) are left alone.
func Migrate(ctx context.Context, db *gorm.DB) error {
	return migrateTo(ctx, db, LatestVersion())
}

// migrateTo is Migrate up to version last (tests of a migration that
// carries data over start from the schema before it).
func migrateTo(ctx context.Context, db *gorm.DB, last int64) error {
	db = db.WithContext(ctx)
	apply := func(conn *gorm.DB) error {
		for _, m := range migrations {
			if m.version > last {
				break
			}
			if err := applyOne(conn, m); err != nil {
				return err
			}
		}
		return nil
	}
	if Dialect(db) == Postgres {
		return withAdvisoryLock(ctx, db, apply)
	}
	return apply(db)
}

// applyOne runs m in a transaction unless it is already recorded.
func applyOne(db *gorm.DB, m migration) error {
	dialect := Dialect(db)
	stmts, err := m.statements(dialect)
	if err != nil {
		return err
	}
	err = db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(fmt.Sprintf(createMigrationsTable, typesFor(dialect).Time)).Error; err != nil {
			return err
		}
		var n int64
		if err := tx.Raw("SELECT COUNT(*) FROM schema_migrations WHERE version = ?", m.version).Scan(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		for _, s := range stmts {
			if err := tx.Exec(s).Error; err != nil {
				return err
			}
		}
		return tx.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.version, m.name, Now()).Error
	})
	if err != nil {
		return fmt.Errorf("apply migration %d (%s): %w", m.version, m.name, Translate(err))
	}
	return nil
}

// withAdvisoryLock runs fn on one pinned connection while it holds the
// migration lock. If the unlock fails the connection is thrown away, so a
// lock can never go back into the pool.
func withAdvisoryLock(ctx context.Context, db *gorm.DB, fn func(conn *gorm.DB) error) error {
	return db.Connection(func(conn *gorm.DB) error {
		if err := conn.Exec("SELECT pg_advisory_lock(?)", migrationLockKey).Error; err != nil {
			return fmt.Errorf("take migration lock: %w", Translate(err))
		}
		fnErr := fn(conn)
		// Unlock even when ctx is done; the lock must not outlive this call.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := conn.WithContext(uctx).Exec("SELECT pg_advisory_unlock(?)", migrationLockKey).Error; err != nil {
			if c, ok := conn.Statement.ConnPool.(*sql.Conn); ok {
				_ = c.Raw(func(any) error { return driver.ErrBadConn })
			}
			if fnErr == nil {
				fnErr = fmt.Errorf("release migration lock: %w", Translate(err))
			}
		}
		return fnErr
	})
}

// Version reports the highest migration applied to db (0 for an empty
// database).
func Version(ctx context.Context, db *gorm.DB) (int64, error) {
	applied, err := appliedVersions(ctx, db)
	if err != nil {
		return 0, err
	}
	var v int64
	for a := range applied {
		v = max(v, a)
	}
	return v, nil
}

// Check is the readiness probe: the database answers and every migration
// this binary knows has been applied.
func Check(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("database: %w", errs.ErrUnavailable)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("database not reachable: %w", Translate(err))
	}
	applied, err := appliedVersions(ctx, db)
	if err != nil {
		return err
	}
	var pending []int64
	for _, m := range migrations {
		if !applied[m.version] {
			pending = append(pending, m.version)
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("database schema is missing migrations %v (this binary needs version %d); run `flyte-manager migrate`: %w",
			pending, LatestVersion(), errs.ErrPrecondition)
	}
	return nil
}

func appliedVersions(ctx context.Context, db *gorm.DB) (map[int64]bool, error) {
	db = db.WithContext(ctx)
	exists := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
	if Dialect(db) == Postgres {
		exists = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'"
	}
	var n int64
	if err := db.Raw(exists).Scan(&n).Error; err != nil {
		return nil, fmt.Errorf("look for schema_migrations: %w", Translate(err))
	}
	if n == 0 {
		return map[int64]bool{}, nil
	}
	var versions []int64
	if err := db.Raw("SELECT version FROM schema_migrations").Scan(&versions).Error; err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", Translate(err))
	}
	out := make(map[int64]bool, len(versions))
	for _, v := range versions {
		out[v] = true
	}
	return out, nil
}
