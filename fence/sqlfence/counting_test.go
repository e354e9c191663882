package sqlfence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/leasekit/lease/fence/sqlfence"
)

// counter records what a pool sends to its database: statements (Exec or
// Query, on a connection or a prepared statement), prepares, and
// transaction begins, commits and rollbacks. Each is one round trip to a
// server (SQLite runs in process: no round trips at all).
type counter struct {
	mu     sync.Mutex
	events []string
}

func (c *counter) add(ev string) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
}

// take returns and forgets what was recorded, as "begin exec:INSERT ...
// commit" with each statement's first word.
func (c *counter) take() (summary string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.Join(c.events, " ")
	n = len(c.events)
	c.events = nil
	return s, n
}

// countingDB returns a pool on s's database whose traffic c records.
func countingDB(t testing.TB, s *store, c *counter) *sql.DB {
	t.Helper()
	probe, err := sql.Open(s.driver, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	drv := probe.Driver()
	probe.Close()
	var inner driver.Connector
	if dc, ok := drv.(driver.DriverContext); ok {
		if inner, err = dc.OpenConnector(s.dsn); err != nil {
			t.Fatal(err)
		}
	} else {
		inner = dsnConnector{drv, s.dsn}
	}
	db := sql.OpenDB(countingConnector{inner, c})
	t.Cleanup(func() { db.Close() })
	return db
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (d dsnConnector) Connect(context.Context) (driver.Conn, error) { return d.drv.Open(d.dsn) }
func (d dsnConnector) Driver() driver.Driver                        { return d.drv }

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

func firstWord(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexAny(q, " \n\t"); i > 0 {
		return q[:i]
	}
	return q
}

func (cn *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := cn.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.ExecContext(ctx, q, args)
	if err != driver.ErrSkip {
		cn.c.add("exec:" + firstWord(q))
	}
	return r, err
}

func (cn *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := cn.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := qc.QueryContext(ctx, q, args)
	if err != driver.ErrSkip {
		cn.c.add("query:" + firstWord(q))
	}
	return r, err
}

func (cn *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	cn.c.add("prepare:" + firstWord(q))
	if pc, ok := cn.Conn.(driver.ConnPrepareContext); ok {
		return pc.PrepareContext(ctx, q)
	}
	return cn.Conn.Prepare(q)
}

func (cn *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	bt, ok := cn.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("counting: the driver has no BeginTx")
	}
	tx, err := bt.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	cn.c.add("begin")
	return countingTx{tx, cn.c}, nil
}

func (cn *countingConn) ResetSession(ctx context.Context) error {
	if rs, ok := cn.Conn.(driver.SessionResetter); ok {
		return rs.ResetSession(ctx)
	}
	return nil
}

func (cn *countingConn) IsValid() bool {
	if v, ok := cn.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (cn *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := cn.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type countingTx struct {
	driver.Tx
	c *counter
}

func (tx countingTx) Commit() error   { tx.c.add("commit"); return tx.Tx.Commit() }
func (tx countingTx) Rollback() error { tx.c.add("rollback"); return tx.Tx.Rollback() }

// TestStatementsPerWrite counts what a guarded write sends next to the
// same write unguarded: the fence adds exactly one statement (one round
// trip on a server) to the write's transaction, whether it is accepted or
// refused, and Check alone is one statement.
func TestStatementsPerWrite(t *testing.T) {
	allStores(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		c := &counter{}
		db := countingDB(t, s, c)
		f, err := sqlfence.New(ctx, db, sqlfence.WithTable(s.fences), sqlfence.WithDialect(s.dialect))
		if err != nil {
			t.Fatal(err)
		}
		upsert := s.upsert()
		write := func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, upsert, "k", "v"); return err }
		// Warm up: open the connection, create the rows.
		if err := f.Tx(ctx, "report", 10, write); err != nil {
			t.Fatal(err)
		}
		c.take()

		check := func(what, want string, run func() error, wantErr bool) {
			t.Helper()
			err := run()
			if (err != nil) != wantErr {
				t.Fatalf("%s: %v", what, err)
			}
			got, n := c.take()
			t.Logf("%s: %d (each a round trip on a server): %s", what, n, got)
			if got != want {
				t.Errorf("%s sent %q; want %q", what, got, want)
			}
		}
		stmt := "query:INSERT"
		if s.dialect == sqlfence.MySQL {
			stmt = "exec:INSERT"
		}
		check("unguarded write, autocommit", "exec:INSERT", func() error { _, err := db.ExecContext(ctx, upsert, "k", "v"); return err }, false)
		check("unguarded write in a transaction", "begin exec:INSERT commit", func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := write(tx); err != nil {
				return err
			}
			return tx.Commit()
		}, false)
		check("guarded write (Tx), accepted", "begin "+stmt+" exec:INSERT commit", func() error { return f.Tx(ctx, "report", 10, write) }, false)
		check("guarded write (Tx), refused", "begin "+stmt+" rollback", func() error { return f.Tx(ctx, "report", 9, write) }, true)
		check("Check alone, accepted", stmt, func() error { return f.Check(ctx, "report", 11) }, false)
		check("Check alone, refused", stmt, func() error { return f.Check(ctx, "report", 9) }, true)
	})
}
