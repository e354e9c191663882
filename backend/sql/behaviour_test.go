package sqllease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestAutoCreateAsksTheCatalog checks that the first operation creates a
// missing table, that the lookup sent no failing statement, and that with
// WithoutAutoCreate a missing table is a clear error and stays missing.
func TestAutoCreateAsksTheCatalog(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		ctx := context.Background()
		table := randomTable()
		t.Cleanup(func() { dropTable(s.db, s.dialect, table) })

		off, err := New(s.db, WithTable(table), WithoutAutoCreate())
		if err != nil {
			t.Fatal(err)
		}
		_, err = off.Acquire(ctx, "x", "a", time.Minute)
		if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "Schema") {
			t.Fatalf("Acquire on a missing table with auto-create off: got %v, want an error saying it does not exist and pointing at Schema", err)
		}
		if lookup(t, off).exists {
			t.Fatal("the table exists after a Locker with auto-create off ran: it must not create it")
		}

		var c counter
		l, err := New(countingDB(t, s, &c), WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Acquire(ctx, "x", "a", time.Minute); err != nil {
			t.Fatalf("Acquire with auto-create: %v", err)
		}
		stmts, _ := c.take()
		created := false
		for _, st := range stmts {
			if st.err != nil {
				t.Errorf("a statement failed while setting up: %q: %v", st.query, st.err)
			}
			created = created || strings.HasPrefix(st.query, "CREATE TABLE IF NOT EXISTS "+table)
		}
		if !created {
			t.Errorf("no CREATE TABLE IF NOT EXISTS %s among %d statements", table, len(stmts))
		}
		if !lookup(t, l).exists {
			t.Fatal("the table does not exist after auto-create")
		}
		// Later operations do not look again.
		c.take()
		if _, err := l.Inspect(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if stmts, _ := c.take(); len(stmts) != 1 {
			t.Errorf("Inspect after setup sent %d statements, want 1", len(stmts))
		}
		// Now that it exists, the Locker with auto-create off works.
		off2, _ := New(s.db, WithTable(table), WithoutAutoCreate())
		if got, err := off2.Inspect(ctx, "x"); err != nil || got.Owner != "a" {
			t.Fatalf("Inspect with auto-create off on an existing table: %v, %v", got, err)
		}
	})
}

// TestSchemaIsWhatAutoCreateRuns checks that the exported DDL, run by the
// user, makes a table a Locker with WithoutAutoCreate can use.
func TestSchemaIsWhatAutoCreateRuns(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		table := randomTable()
		ddl, err := Schema(s.dialect, table)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.Exec(ddl); err != nil {
			t.Fatalf("running Schema's DDL: %v", err)
		}
		t.Cleanup(func() { dropTable(s.db, s.dialect, table) })
		l, err := New(s.db, WithTable(table), WithoutAutoCreate())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(context.Background(), "x", "a", time.Minute); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCallersTransactionIsLeftIntact opens a transaction on the pool,
// then creates and uses a Locker (auto-creating its table) on the same
// pool, and checks the transaction still works and commits.
func TestCallersTransactionIsLeftIntact(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		ctx := context.Background()
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var one int
		if err := tx.QueryRow("SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		table := randomTable()
		t.Cleanup(func() { dropTable(s.db, s.dialect, table) })
		l, err := New(s.db, WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Acquire(ctx, "tx", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Inspect(ctx, "missing"); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatal(err)
		}
		if err := l.Release(ctx, got); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow("SELECT 2").Scan(&one); err != nil || one != 2 {
			t.Fatalf("the caller's transaction broke after the Locker ran: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("the caller's transaction cannot commit after the Locker ran: %v", err)
		}
	})
}

// TestSQLiteTwoPoolsOneFile acts as two processes on one SQLite file: two
// *sql.DB, 32 goroutines contending for the same names. Every Acquire
// must be a win or ErrHeld, never "database is locked".
func TestSQLiteTwoPoolsOneFile(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	lockers := []*Locker{s.openLocker(t), s.openLocker(t)}
	if lockers[0].s.db == lockers[1].s.db {
		t.Fatal("the two lockers share a pool")
	}
	ctx := context.Background()
	const goroutines, rounds = 32, 20
	for round := 0; round < rounds; round++ {
		name := fmt.Sprintf("contended-%d", round)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []lease.Lease
		)
		for i := 0; i < goroutines; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				got, err := lockers[i%2].Acquire(ctx, name, fmt.Sprintf("owner-%d", i), time.Minute)
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, got)
					mu.Unlock()
				case !errors.Is(err, lease.ErrHeld):
					t.Errorf("round %d: Acquire: %v (want a win or ErrHeld)", round, err)
				}
				// Mixed traffic on other names meanwhile.
				own := fmt.Sprintf("own-%d-%d", round, i)
				l, err := lockers[(i+1)%2].Acquire(ctx, own, "me", time.Minute)
				if err != nil {
					t.Errorf("Acquire of an uncontended name: %v", err)
					return
				}
				if _, err := lockers[i%2].Renew(ctx, l, time.Minute); err != nil {
					t.Errorf("Renew: %v", err)
				}
				if err := lockers[(i+1)%2].Release(ctx, l); err != nil {
					t.Errorf("Release: %v", err)
				}
			}(i)
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, len(wins))
		}
	}
}

// TestClosedPool checks that a pool the caller closed gives a clear,
// wrapped error, never ErrHeld, ErrLost or ErrNotHeld.
func TestClosedPool(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		db := countingDB(t, s, &counter{})
		l, err := New(db, WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		held, err := l.Acquire(ctx, "closed-pool", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, errA := l.Acquire(ctx, "closed-pool", "b", time.Minute)
		_, errR := l.Renew(ctx, held, time.Minute)
		errRel := l.Release(ctx, held)
		_, errI := l.Inspect(ctx, "closed-pool")
		for op, err := range map[string]error{"Acquire": errA, "Renew": errR, "Release": errRel, "Inspect": errI} {
			if err == nil || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("%s on a closed pool: %v, want a plain error", op, err)
				continue
			}
			if !errors.Is(err, errClosedPool) || !strings.Contains(err.Error(), "closed-pool") {
				t.Errorf("%s on a closed pool: %q does not say the pool was closed and name the lease", op, err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Inspect(ctx, "x"); !errors.Is(err, lease.ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
	})
}

// TestCloseLeavesTheCallersPoolOpen checks that Close of a Locker from New
// does not close the caller's pool, and Close of one from Open does.
func TestCloseLeavesTheCallersPoolOpen(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	l := s.newLocker(t)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Ping(); err != nil {
		t.Fatalf("the caller's pool was closed by Close: %v", err)
	}
	o, err := OpenConnector(context.Background(), s.connector)
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	if err := o.s.db.Ping(); err == nil {
		t.Fatal("Close left open the pool OpenConnector made")
	}
}

// TestInvalidTable checks that a bad table name is refused before any SQL
// is built, by New, Open and Schema.
func TestInvalidTable(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	for _, bad := range []string{"", "1leases", "leases; DROP TABLE x", `"leases"`, "a.b.c", "le-ases", strings.Repeat("x", 64), "lease s"} {
		if _, err := New(s.db, WithTable(bad)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New(WithTable(%q)): %v, want ErrInvalid", bad, err)
		}
		if _, err := Schema(SQLite, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Schema(%q): %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := OpenConnector(context.Background(), s.connector, WithTable("bad-name")); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("OpenConnector with WithTable(bad-name): %v, want ErrInvalid", err)
	}
	for _, good := range []string{"leases", "_x", "jobs.leases", "L" + strings.Repeat("x", 62)} {
		if _, err := New(s.db, WithTable(good)); err != nil {
			t.Errorf("New(WithTable(%q)): %v", good, err)
		}
	}
	if _, err := New(s.db, WithDialect(Dialect(42))); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("WithDialect(42): %v, want ErrInvalid", err)
	}
}

// TestCleanupKeepsTokenOrder deletes the row of a released name and
// checks the next tenure still gets a larger token, and that held names
// are kept.
func TestCleanupKeepsTokenOrder(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		ctx := context.Background()
		l := s.newLocker(t)
		gone, err := l.Acquire(ctx, "cleanup-gone", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		kept, err := l.Acquire(ctx, "cleanup-kept", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, gone); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Cleanup(ctx, time.Second); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("Cleanup(1s): %v, want ErrInvalid (shorter than MinCleanupAge)", err)
		}
		if n, err := l.Cleanup(ctx, time.Hour); err != nil || n != 0 {
			t.Fatalf("Cleanup(1h) deleted %d (%v), want 0: the release was just now", n, err)
		}
		time.Sleep(2 * time.Millisecond)
		n, err := l.cleanup(ctx, time.Millisecond) // the test's shortcut past MinCleanupAge
		if err != nil || n < 1 {
			t.Fatalf("cleanup(1ms) deleted %d (%v), want the released row", n, err)
		}
		var rows int
		if err := s.db.QueryRow("SELECT count(*) FROM " + s.table).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Inspect(ctx, "cleanup-kept"); err != nil || got.Token != kept.Token {
			t.Fatalf("the held name's row did not survive cleanup: %v, %v", got, err)
		}
		next, err := l.Acquire(ctx, "cleanup-gone", "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if next.Token <= gone.Token {
			t.Fatalf("after cleanup the next token %d is not greater than the deleted row's %d", next.Token, gone.Token)
		}
	})
}
