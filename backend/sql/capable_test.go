package sqllease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/batchtest"
)

// TestCanSaysWhatTheStoreCan: lease.Can[driver.Watcher] is false for SQLite
// and MySQL Lockers and for PostgreSQL Lockers without a Listener, and
// true for a PostgreSQL Locker with a Listener, before and after its
// first operation; the store (driver.Capable) says the same of
// driver.Watcher and driver.TurnWatcher, and every Locker lists,
// force-releases and renews in batches.
func TestCanSaysWhatTheStoreCan(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, l *Locker, watches bool) {
		t.Helper()
		for _, when := range []string{"before", "after"} {
			if got := lease.Can[driver.Watcher](l); got != watches {
				t.Errorf("%s the first operation, lease.Can[driver.Watcher] = %v, want %v", when, got, watches)
			}
			if !lease.Can[lease.Lister](l) || !lease.Can[lease.ForceReleaser](l) || !lease.Can[batchtest.Batcher](l) {
				t.Errorf("%s the first operation, lease.Can says no to Lister, ForceReleaser or BatchRenewer", when)
			}
			if l.s.Can((*driver.Watcher)(nil)) != watches || l.s.Can((*driver.TurnWatcher)(nil)) != watches {
				t.Errorf("%s the first operation, the store's Can: Watcher %v, TurnWatcher %v; want %v", when,
					l.s.Can((*driver.Watcher)(nil)), l.s.Can((*driver.TurnWatcher)(nil)), watches)
			}
			if l.s.Can((*driver.Store)(nil)) || l.s.Can(nil) {
				t.Errorf("%s the first operation, the store's Can says yes to what it does not know", when)
			}
			if _, err := l.Acquire(t.Context(), "can", "a", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) { check(t, sqliteStore(t).newLocker(t), false) })
	t.Run("mysql", func(t *testing.T) { check(t, mysqlStore(t).newLocker(t), false) })
	t.Run("postgresql", func(t *testing.T) { check(t, postgresStore(t).newLocker(t), true) })
	t.Run("postgresql-without-listener", func(t *testing.T) {
		s := postgresStore(t)
		l, err := New(s.db, WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		check(t, l, false)
	})
}

// TestFairWaitNeedsALine: on a Locker that keeps no line (SQLite, MySQL,
// PostgreSQL without a Listener), lease.Run with WithFairWait fails at
// once with an error matching errors.ErrUnsupported that names
// WithFairWait, without acquiring: it sends no statement, fn does not
// run, and the name stays free; on a held name it does not wait. On a
// PostgreSQL Locker with a Listener it runs fn. Not parallel: "at once"
// is a bound of 500ms.
func TestFairWaitNeedsALine(t *testing.T) {
	refused := func(t *testing.T, s *testStore, opts ...Option) {
		var c counter
		l, err := New(countingDB(t, s, &c), append([]Option{WithTable(s.table)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := t.Context()
		run := func() error {
			return lease.Run(ctx, l, "fair", time.Minute, func(context.Context) error {
				t.Error("fn ran")
				return nil
			}, lease.WithFairWait(time.Second))
		}
		isRefusal := func(err error) {
			t.Helper()
			if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "WithFairWait") {
				t.Fatalf("Run with WithFairWait = %v, want errors.ErrUnsupported naming WithFairWait", err)
			}
		}
		isRefusal(run())
		if stmts, txs := c.take(); len(stmts) != 0 || txs != 0 {
			t.Errorf("the refused Run sent %d statements and %d transactions, want none", len(stmts), txs)
		}
		if got, err := l.Inspect(ctx, "fair"); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("after the refused Run, Inspect = %+v, %v; want the name free", got, err)
		}
		if _, err := l.Acquire(ctx, "fair", "other", time.Minute); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		isRefusal(run())
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("the refused Run of a held name took %s, want it to fail at once", d)
		}
	}
	t.Run("sqlite", func(t *testing.T) { refused(t, sqliteStore(t)) })
	t.Run("mysql", func(t *testing.T) { refused(t, mysqlStore(t)) })
	t.Run("postgresql-without-listener", func(t *testing.T) { refused(t, postgresStore(t)) })
	t.Run("postgresql", func(t *testing.T) {
		l := postgresStore(t).newLocker(t)
		ran := false
		err := lease.Run(t.Context(), l, "fair", time.Minute, func(context.Context) error {
			ran = true
			return nil
		}, lease.WithFairWait(time.Second))
		if err != nil || !ran {
			t.Fatalf("Run with WithFairWait on a Locker that keeps a line: %v, fn ran %v", err, ran)
		}
	})
}
