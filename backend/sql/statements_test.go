package sqllease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestStatementsPerOperation counts, at the driver, the statements each
// operation sends, on every dialect available, and checks that every one
// is a single statement (MySQL's ForceRelease and the MySQL 8 Acquire
// are transactions, counted and reported as such). Run with -v to see the
// numbers.
func TestStatementsPerOperation(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		t.Run("returning", func(t *testing.T) { countStatements(t, s, false) })
		if s.dialect == MySQL {
			t.Run("mysql8-path", func(t *testing.T) { countStatements(t, s, true) })
		}
	})
}

func countStatements(t *testing.T, s *testStore, noReturning bool) {
	var c counter
	l, err := New(countingDB(t, s, &c), WithTable(s.table))
	if err != nil {
		t.Fatal(err)
	}
	if noReturning {
		forceMySQL8Path(t, l)
	}
	defer l.Close()
	ctx := context.Background()
	name := fmt.Sprintf("count-%d", time.Now().UnixNano())

	// The first operation also looks up the table (and creates it).
	if _, err := l.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect: %v", err)
	}
	setup, _ := c.take()
	t.Logf("first use: %d statements (server version on MySQL, catalog lookup, and CREATE TABLE and a second lookup if it was missing)", len(setup)-1)
	for _, st := range setup {
		if st.err != nil {
			t.Errorf("setup sent a statement that failed (a failing probe aborts a caller's PostgreSQL transaction): %q: %v", st.query, st.err)
		}
	}

	var held lease.Lease
	ops := []struct {
		op         string
		fn         func() error
		stmts, txs int
	}{
		{"Acquire (free name)", func() (err error) { held, err = l.Acquire(ctx, name, "a", time.Minute); return err }, 1, 0},
		{"Acquire (re-entrant)", func() (err error) { held, err = l.Acquire(ctx, name, "a", time.Minute); return err }, 1, 0},
		{"Acquire (held: HeldError)", func() error {
			_, err := l.Acquire(ctx, name, "b", time.Minute)
			if errors.Is(err, lease.ErrHeld) {
				return nil
			}
			return fmt.Errorf("want ErrHeld, got %v", err)
		}, 1, 0},
		{"Renew", func() (err error) { held, err = l.Renew(ctx, held, time.Minute); return err }, 1, 0},
		{"Inspect", func() error { _, err := l.Inspect(ctx, name); return err }, 1, 0},
		{"List", func() error { _, err := l.List(ctx, name); return err }, 1, 0},
		{"Release", func() error { return l.Release(ctx, held) }, 1, 0},
		{"Renew (lost)", func() error {
			if _, err := l.Renew(ctx, held, time.Minute); !errors.Is(err, lease.ErrLost) {
				return fmt.Errorf("want ErrLost, got %v", err)
			}
			return nil
		}, 1, 0},
		{"Release (lost)", func() error {
			if err := l.Release(ctx, held); !errors.Is(err, lease.ErrLost) {
				return fmt.Errorf("want ErrLost, got %v", err)
			}
			return nil
		}, 1, 0},
		{"Acquire (after release)", func() (err error) { held, err = l.Acquire(ctx, name, "b", time.Minute); return err }, 1, 0},
		{"ForceRelease", func() error { _, err := l.ForceRelease(ctx, name); return err }, 1, 0},
	}
	tokens := map[int64]bool{} // tokens the database gave us, sent back by Renew and Release
	for _, o := range ops {
		wantStmts, wantTxs := o.stmts, o.txs
		if s.dialect == MySQL && o.op == "ForceRelease" {
			wantStmts, wantTxs = 2, 1
		}
		if noReturning && len(o.op) >= 7 && o.op[:7] == "Acquire" {
			wantStmts, wantTxs = 2, 1
		}
		if err := o.fn(); err != nil {
			t.Fatalf("%s: %v", o.op, err)
		}
		stmts, txs := c.take()
		t.Logf("%-26s %d statement(s), %d transaction(s)", o.op, len(stmts), txs)
		if len(stmts) != wantStmts || txs != wantTxs {
			t.Errorf("%s sent %d statements in %d transactions, want %d in %d", o.op, len(stmts), txs, wantStmts, wantTxs)
		}
		tokens[int64(held.Token)] = true
		for _, st := range stmts {
			checkNoAppClock(t, o.op, st, tokens)
		}
	}
}

// checkNoAppClock fails if a statement carries a time from the
// application's clock: no time.Time, and no integer that looks like an
// epoch time in seconds, milliseconds or microseconds, other than the
// tokens the database itself issued (they start at its ms time * 1000).
func checkNoAppClock(t *testing.T, op string, st sentStmt, tokens map[int64]bool) {
	t.Helper()
	now := time.Now()
	for _, a := range st.args {
		switch v := a.Value.(type) {
		case time.Time:
			t.Errorf("%s sent a time.Time argument %v: the application's clock must not reach the statement", op, v)
		case int64:
			if tokens[v] {
				continue
			}
			for _, unit := range []int64{1, 1000, 1000000} {
				if ref := now.Unix() * unit; v > ref/2 && v < ref*2 {
					t.Errorf("%s sent %d, which looks like an epoch time: the application's clock must not reach the statement", op, v)
				}
			}
		}
	}
}
