package sqllease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"testing"
)

// counter records what a pool sends to its database: one entry per
// statement executed (Exec or Query on a connection or a prepared
// statement) and per transaction begin and commit, with each statement's
// arguments and error.
type counter struct {
	mu    sync.Mutex
	stmts []sentStmt
	txs   int // BeginTx calls
	// fail, when set, is asked before each statement is sent; an error
	// it returns is the statement's, and nothing is sent.
	fail func(query string) error
}

// injected returns the error c.fail gives for q, if any.
func (c *counter) injected(q string) error {
	c.mu.Lock()
	f := c.fail
	c.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(q)
}

type sentStmt struct {
	query string
	args  []driver.NamedValue
	err   error
}

func (c *counter) add(q string, args []driver.NamedValue, err error) {
	c.mu.Lock()
	c.stmts = append(c.stmts, sentStmt{q, args, err})
	c.mu.Unlock()
}

// take returns and forgets what was recorded.
func (c *counter) take() (stmts []sentStmt, txs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stmts, txs = c.stmts, c.txs
	c.stmts, c.txs = nil, 0
	return stmts, txs
}

// countingDB returns a pool on s's database whose statements c records.
func countingDB(t testing.TB, s *testStore, c *counter) *sql.DB {
	t.Helper()
	db := sql.OpenDB(countingConnector{s.connector, c})
	t.Cleanup(func() { db.Close() })
	return db
}

type countingConnector struct {
	inner driver.Connector
	c     *counter
}

func (cc countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{conn, cc.c}, nil
}

func (cc countingConnector) Driver() driver.Driver { return cc.inner.Driver() }

type countingConn struct {
	driver.Conn
	c *counter
}

func (cn *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := cn.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := cn.c.injected(q); err != nil {
		return nil, err
	}
	r, err := e.ExecContext(ctx, q, args)
	if err != driver.ErrSkip {
		cn.c.add(q, args, err)
	}
	return r, err
}

func (cn *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := cn.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := cn.c.injected(q); err != nil {
		return nil, err
	}
	r, err := qc.QueryContext(ctx, q, args)
	if err != driver.ErrSkip {
		cn.c.add(q, args, err)
	}
	return r, err
}

func (cn *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if err := cn.c.injected(q); err != nil {
		return nil, err
	}
	var st driver.Stmt
	var err error
	if pc, ok := cn.Conn.(driver.ConnPrepareContext); ok {
		st, err = pc.PrepareContext(ctx, q)
	} else {
		st, err = cn.Conn.Prepare(q)
	}
	if err != nil {
		return nil, err
	}
	return &countingStmt{st, q, cn.c}, nil
}

func (cn *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	cn.c.mu.Lock()
	cn.c.txs++
	cn.c.mu.Unlock()
	b, ok := cn.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("counting driver: the wrapped driver has no BeginTx")
	}
	return b.BeginTx(ctx, opts)
}

func (cn *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := cn.Conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (cn *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := cn.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cn *countingConn) IsValid() bool {
	if v, ok := cn.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type countingStmt struct {
	driver.Stmt
	q string
	c *counter
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	var r driver.Result
	var err error
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		r, err = e.ExecContext(ctx, args)
	} else {
		return nil, driver.ErrSkip
	}
	s.c.add(s.q, args, err)
	return r, err
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	var r driver.Rows
	var err error
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		r, err = q.QueryContext(ctx, args)
	} else {
		return nil, driver.ErrSkip
	}
	s.c.add(s.q, args, err)
	return r, err
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
