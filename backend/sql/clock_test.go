package sqllease

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testenv"
)

// TestExpiresIsTheDatabaseClock checks that Expires is the database's
// now+ttl, comparing it with the database's own clock read in a separate
// query, and that HeldError.Remaining is measured against that clock too.
// (TestStatementsPerOperation checks that no statement carries a time from
// the application's clock, so skewing that clock cannot change anything.)
// Not parallel (nor TestSessionTimeZoneChangesNothing): it holds the
// database's Expires to within a second of this machine's clock, read
// after the Acquire and a query.
func TestExpiresIsTheDatabaseClock(t *testing.T) {
	allStores(t, func(t *testing.T, s *testStore) {
		checkDBClock(t, s, s.newLocker(t))
	})
}

// TestSessionTimeZoneChangesNothing runs the clock check on pools whose
// sessions use an odd time zone (+12:45 on MySQL, Pacific/Chatham on
// PostgreSQL): epoch milliseconds must not depend on it.
func TestSessionTimeZoneChangesNothing(t *testing.T) {
	t.Run("postgresql", func(t *testing.T) {
		s := postgresStore(t)
		db := sql.OpenDB(postgresConnector(t, testenv.Lookup(t, "LEASE_TEST_POSTGRES"), map[string]string{"timezone": "Pacific/Chatham"}))
		defer db.Close()
		var tz string
		if err := db.QueryRow("SHOW TIME ZONE").Scan(&tz); err != nil || tz != "Pacific/Chatham" {
			t.Fatalf("session time zone is %q (%v), want Pacific/Chatham", tz, err)
		}
		l, err := New(db, WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		checkDBClock(t, s, l)
	})
	t.Run("mysql", func(t *testing.T) {
		s := mysqlStore(t)
		cfg := mysqlConfig(t, testenv.Lookup(t, "LEASE_TEST_MYSQL"))
		cfg.Params = map[string]string{"time_zone": "'+12:45'"}
		db := sql.OpenDB(mysqlConnector(t, cfg))
		defer db.Close()
		var tz string
		if err := db.QueryRow("SELECT @@session.time_zone").Scan(&tz); err != nil || tz != "+12:45" {
			t.Fatalf("session time zone is %q (%v), want +12:45", tz, err)
		}
		l, err := New(db, WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		checkDBClock(t, s, l)
	})
}

func checkDBClock(t *testing.T, s *testStore, l *Locker) {
	t.Helper()
	ctx := context.Background()
	dbNow := func() time.Time {
		var ms int64
		if err := s.db.QueryRowContext(ctx, nowSQL(s.dialect)).Scan(&ms); err != nil {
			t.Fatal(err)
		}
		return time.UnixMilli(ms)
	}
	const ttl = 10 * time.Minute
	name := "clock-" + randomTable()
	before := dbNow()
	got, err := l.Acquire(ctx, name, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	after := dbNow()
	if got.Expires.Before(before.Add(ttl)) || got.Expires.After(after.Add(ttl)) {
		t.Fatalf("Expires %s is not the database's now+ttl: the database's clock said %s..%s", got.Expires, before.Add(ttl), after.Add(ttl))
	}
	// And against the application's clock, which is the same machine's
	// here: within a second, so the unit and the time zone are right.
	if d := time.Until(got.Expires) - ttl; d < -time.Second || d > time.Second {
		t.Fatalf("Expires %s is %s away from this machine's now+ttl: wrong unit or time zone", got.Expires, d)
	}
	_, err = l.Acquire(ctx, name, "b", ttl)
	var he *lease.HeldError
	if !errorsAs(err, &he) {
		t.Fatalf("second owner: got %v, want a HeldError", err)
	}
	// Remaining is Expires minus the database's now, read in the same
	// statement: a little under the ttl.
	if he.Remaining > ttl || he.Remaining < ttl-5*time.Second {
		t.Fatalf("HeldError.Remaining %s, want just under %s", he.Remaining, ttl)
	}
}
