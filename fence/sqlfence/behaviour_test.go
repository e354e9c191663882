package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/sqlfence"
	"github.com/leasekit/lease/internal/testenv"
)

// TestTxRollsBackOnFailure tests that a write that fails inside Tx takes
// the raised maximum with it, and that a stale Tx never calls fn.
func TestTxRollsBackOnFailure(t *testing.T) {
	allStores(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		f, _ := s.fence(t)
		if err := f.Check(ctx, "n", 10); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("the write failed")
		if err := f.Tx(ctx, "n", 20, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("Tx with a failing fn: %v; want fn's error", err)
		}
		// Had the maximum stayed at 20, 15 would be refused.
		if err := f.Check(ctx, "n", 15); err != nil {
			t.Fatalf("after a rolled-back write with token 20, token 15: %v; want accepted", err)
		}
		called := false
		err := f.Tx(ctx, "n", 12, func(*sql.Tx) error { called = true; return nil })
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Max != 15 || called {
			t.Fatalf("stale Tx: %v, fn called %v; want StaleError with Max 15 and no call", err, called)
		}
	})
}

// TestGuardInCallersTx tests Guard in a transaction the caller began,
// with the write before the check: order within the transaction does not
// matter, commit and rollback do.
func TestGuardInCallersTx(t *testing.T) {
	allStores(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		f, db := s.fence(t)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, s.upsert(), "k", "by 10"); err != nil {
			t.Fatal(err)
		}
		if err := f.Guard(ctx, tx, "n", 10); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, s.upsert(), "k", "by 9"); err != nil {
			t.Fatal(err)
		}
		if err := f.Guard(ctx, tx, "n", 9); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Guard(9) after 10: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := db.QueryRowContext(ctx, s.read(), "k").Scan(&v); err != nil || v != "by 10" {
			t.Fatalf("data reads %q (%v); want \"by 10\"", v, err)
		}
	})
}

// TestConcurrentFirstUse tests that writers racing on a name nobody used
// yet, each in its own transaction, all get a verdict: the first insert
// of the fence row must not fail the others with a duplicate key.
func TestConcurrentFirstUse(t *testing.T) {
	allStores(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		f, _ := s.fence(t)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f.Tx(ctx, "fresh", uint64(i+1), func(*sql.Tx) error { return nil })
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil && !errors.Is(err, fence.ErrStale) {
				t.Errorf("writer with token %d: %v", i+1, err)
			}
		}
		if err := f.Check(ctx, "fresh", n); err != nil {
			t.Fatalf("the largest token after the race: %v", err)
		}
	})
}

// TestGuardFuncPgx runs the fence statement through pgx's own Tx, as a
// pgx user would (no database/sql).
func TestGuardFuncPgx(t *testing.T) {
	s := postgresStore(t)
	ctx := context.Background()
	f, _ := s.fence(t)
	conn, err := pgx.Connect(ctx, testenv.Lookup(t, "LEASE_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	guarded := func(token uint64, value string) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		err = f.GuardFunc(ctx, "pgx-name", token, func(ctx context.Context, stmt string, args ...any) (max int64, err error) {
			err = tx.QueryRow(ctx, stmt, args...).Scan(&max)
			return max, err
		})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.data+` (k, v) VALUES ('pgx', $1) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, value); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := guarded(10, "by 10"); err != nil {
		t.Fatal(err)
	}
	var se *fence.StaleError
	if err := guarded(5, "by 5"); !errors.As(err, &se) || se.Max != 10 {
		t.Fatalf("stale write through pgx: %v", err)
	}
	// The same fence through database/sql sees the maximum pgx raised.
	if err := f.Check(ctx, "pgx-name", 9); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("database/sql after pgx: %v", err)
	}
	var v string
	if err := conn.QueryRow(ctx, `SELECT v FROM `+s.data+` WHERE k = 'pgx'`).Scan(&v); err != nil || v != "by 10" {
		t.Fatalf("data reads %q (%v)", v, err)
	}
}

// TestGuardFunc tests GuardFunc's arguments and its refusal on MySQL.
func TestGuardFunc(t *testing.T) {
	s := sqliteStore(t)
	ctx := context.Background()
	f, db := s.fence(t)
	run := func(ctx context.Context, stmt string, args ...any) (max int64, err error) {
		err = db.QueryRowContext(ctx, stmt, args...).Scan(&max)
		return max, err
	}
	if err := f.GuardFunc(ctx, "n", 10, run); err != nil {
		t.Fatal(err)
	}
	if err := f.GuardFunc(ctx, "n", 9, run); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("GuardFunc(9) after 10: %v", err)
	}
	if err := f.GuardFunc(ctx, "n", 0, run); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("GuardFunc with token 0: %v", err)
	}
	boom := errors.New("connection reset")
	err := f.GuardFunc(ctx, "n", 11, func(context.Context, string, ...any) (int64, error) { return 0, boom })
	if !errors.Is(err, boom) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("GuardFunc with a failing query: %v", err)
	}
	my, err := sqlfence.New(ctx, db, sqlfence.WithDialect(sqlfence.MySQL), sqlfence.WithoutAutoCreate())
	if err != nil {
		t.Fatal(err)
	}
	if err := my.GuardFunc(ctx, "n", 1, run); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("GuardFunc on MySQL: %v; want ErrInvalid", err)
	}
}

// TestNew tests dialect detection, options and the table's creation.
func TestNew(t *testing.T) {
	ctx := context.Background()
	if _, err := sqlfence.New(ctx, nil); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("New(nil): %v", err)
	}
	allStores(t, func(t *testing.T, s *store) {
		db := s.open(t)
		f, err := sqlfence.New(ctx, db, sqlfence.WithTable(s.fences))
		if err != nil {
			t.Fatal(err)
		}
		if f.Dialect() != s.dialect || f.Table() != s.fences {
			t.Fatalf("detected %v table %s; want %v %s", f.Dialect(), f.Table(), s.dialect, s.fences)
		}
		// Again, with the table there: nothing to do.
		if _, err := sqlfence.New(ctx, db, sqlfence.WithTable(s.fences)); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"", "1x", "a-b", "a.b.c", "x; DROP TABLE y", strings.Repeat("a", 64)} {
			if _, err := sqlfence.New(ctx, db, sqlfence.WithTable(bad)); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("WithTable(%q): %v; want ErrInvalid", bad, err)
			}
		}
		if _, err := sqlfence.New(ctx, db, sqlfence.WithDialect(sqlfence.Dialect(9))); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("WithDialect(9): %v; want ErrInvalid", err)
		}
		// Without auto-create: nothing sent, and a clear error at first use.
		missing := randomTable("missing")
		g, err := sqlfence.New(ctx, db, sqlfence.WithTable(missing), sqlfence.WithoutAutoCreate())
		if err != nil {
			t.Fatal(err)
		}
		err = g.Check(ctx, "n", 1)
		if err == nil || errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("Check on a missing table: %v; want the database's error naming %s", err, missing)
		}
		ddl, err := sqlfence.Schema(s.dialect, missing)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, ddl)
		t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + missing) })
		if err := g.Check(ctx, "n", 1); err != nil {
			t.Fatalf("Check after creating the table from Schema: %v", err)
		}
	})
}

func TestSchema(t *testing.T) {
	for _, d := range []sqlfence.Dialect{sqlfence.SQLite, sqlfence.PostgreSQL, sqlfence.MySQL} {
		ddl, err := sqlfence.Schema(d, "app.fences")
		if err != nil || !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS app.fences (") {
			t.Errorf("Schema(%v): %q, %v", d, ddl, err)
		}
	}
	if _, err := sqlfence.Schema(0, "t"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Schema(0): %v", err)
	}
	if _, err := sqlfence.Schema(sqlfence.SQLite, "no such"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Schema with a bad table: %v", err)
	}
}
