package db

import (
	"container/list"
	"context"
	"database/sql/driver"
	"reflect"
)

// SQLite spends most of a short statement's time compiling it, and gorm's
// own prepared statements do not help inside transactions: gorm prepares a
// statement on the transaction that first runs it, and database/sql then
// compiles it again in every later transaction (a statement bound to a
// transaction is never reused). Every action write is a transaction, so
// before this cache the manager compiled every statement of every write
// (about a fifth of its CPU in the no-op bench). stmtCacheConn keeps, per
// connection, one compiled statement per query text instead, for the pool
// and for transactions alike, and database/sql calls it directly (it is
// the connection's ExecerContext and QueryerContext).

// stmtCacheSize bounds the statements one connection keeps; the manager
// issues a few dozen distinct queries, gorm's generated ones included, so
// the bound only matters for queries built with varying IN lists.
const stmtCacheSize = 256

// stmtCacheConnector wraps every connection of c in a stmtCacheConn.
type stmtCacheConnector struct{ driver.Connector }

func (c stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &stmtCacheConn{Conn: conn, lru: list.New(), byQuery: map[string]*list.Element{}}, nil
}

// stmtCacheConn is one connection and its compiled statements. database/sql
// never uses a connection from two goroutines at once, so it needs no lock.
type stmtCacheConn struct {
	driver.Conn
	lru     *list.List // of *cachedStmt, most recently used first
	byQuery map[string]*list.Element
}

type cachedStmt struct {
	query string
	stmt  driver.Stmt
	// busy: rows read from stmt are still open, so a second use of the
	// same query meanwhile gets a statement of its own.
	busy bool
}

// stmt returns the cached statement for query, compiling it on first use,
// or nil when the cached one is busy.
func (c *stmtCacheConn) stmt(ctx context.Context, query string) (*cachedStmt, error) {
	if el, ok := c.byQuery[query]; ok {
		cs := el.Value.(*cachedStmt)
		if cs.busy {
			return nil, nil
		}
		c.lru.MoveToFront(el)
		return cs, nil
	}
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cs := &cachedStmt{query: query, stmt: s}
	c.byQuery[query] = c.lru.PushFront(cs)
	for c.lru.Len() > stmtCacheSize {
		c.evict(c.lru.Back().Value.(*cachedStmt))
	}
	return cs, nil
}

// evict drops cs, closing it unless rows still read from it (their Close
// does it then).
func (c *stmtCacheConn) evict(cs *cachedStmt) {
	if el, ok := c.byQuery[cs.query]; ok && el.Value == cs {
		delete(c.byQuery, cs.query)
		c.lru.Remove(el)
	}
	if !cs.busy {
		_ = cs.stmt.Close()
	}
}

func (c *stmtCacheConn) cached(cs *cachedStmt) bool {
	el, ok := c.byQuery[cs.query]
	return ok && el.Value == cs
}

func (c *stmtCacheConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	}
	res, err := cs.stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	if err != nil {
		c.evict(cs) // compile afresh next time rather than trust a statement that failed
	}
	return res, err
}

func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	}
	rows, err := cs.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		c.evict(cs)
		return nil, err
	}
	cs.busy = true
	return &cachedRows{Rows: rows, conn: c, cs: cs}, nil
}

func (c *stmtCacheConn) Close() error {
	for el := c.lru.Front(); el != nil; el = el.Next() {
		_ = el.Value.(*cachedStmt).stmt.Close()
	}
	c.lru.Init()
	clear(c.byQuery)
	return c.Conn.Close()
}

// The rest of what database/sql asks of a connection goes to the driver's.

func (c *stmtCacheConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *stmtCacheConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *stmtCacheConn) Ping(ctx context.Context) error {
	return c.Conn.(driver.Pinger).Ping(ctx)
}

func (c *stmtCacheConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *stmtCacheConn) IsValid() bool {
	return c.Conn.(driver.Validator).IsValid()
}

// cachedRows frees its statement for the next use when closed. It passes
// on the column type details the driver's rows give, which gorm reads.
type cachedRows struct {
	driver.Rows
	conn *stmtCacheConn
	cs   *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.cs.busy = false
	if !r.conn.cached(r.cs) { // evicted while in use
		_ = r.cs.stmt.Close()
	}
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	return r.Rows.(driver.RowsColumnTypeDatabaseTypeName).ColumnTypeDatabaseTypeName(i)
}

func (r *cachedRows) ColumnTypeLength(i int) (int64, bool) {
	return r.Rows.(driver.RowsColumnTypeLength).ColumnTypeLength(i)
}

func (r *cachedRows) ColumnTypeNullable(i int) (bool, bool) {
	return r.Rows.(driver.RowsColumnTypeNullable).ColumnTypeNullable(i)
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	return r.Rows.(driver.RowsColumnTypePrecisionScale).ColumnTypePrecisionScale(i)
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	return r.Rows.(driver.RowsColumnTypeScanType).ColumnTypeScanType(i)
}
