package sqllease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestBusyAcquireWritesNothingPostgres checks that an Acquire of a name
// another owner holds leaves the row as it was on PostgreSQL: the same
// row version (xmin, ctid) and no row lock (xmax), so no WAL, no dead
// tuple and no transaction ID, while its answer still names the holder
// and its remaining time.
func TestBusyAcquireWritesNothingPostgres(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("hsql/busy/%d", time.Now().UnixNano())
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	version := func() string {
		var v string
		if err := s.db.QueryRowContext(ctx, `SELECT xmin::text || ' ' || xmax::text || ' ' || ctid::text FROM `+s.table+` WHERE name = $1`, []byte(name)).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := version()
	for i := range 3 {
		_, err := l.Acquire(ctx, name, "other", time.Minute)
		var he *lease.HeldError
		if !errors.As(err, &he) || !errors.Is(err, lease.ErrHeld) || he.Owner != "holder" || he.Remaining <= 0 || he.Remaining > time.Minute {
			t.Fatalf("busy Acquire %d: %v; want ErrHeld by holder with up to a minute left", i+1, err)
		}
		if after := version(); after != before {
			t.Errorf("busy Acquire %d changed the row: xmin xmax ctid %s, was %s", i+1, after, before)
		}
	}
	// The holder's tenure is untouched: same token, and its own Acquire
	// (re-entrant) still extends it.
	got, err := l.Inspect(ctx, name)
	if err != nil || got.Token != held.Token || got.Owner != "holder" {
		t.Fatalf("Inspect after busy Acquires: %+v, %v; want the holder's token %d", got, err, held.Token)
	}
	again, err := l.Acquire(ctx, name, "holder", 2*time.Minute)
	if err != nil || again.Token != held.Token || !again.Expires.After(held.Expires) {
		t.Fatalf("re-entrant Acquire: %+v, %v; want token %d and a later expiry than %s", again, err, held.Token, held.Expires)
	}
	if version() == before {
		t.Error("a re-entrant Acquire left the row version as it was; it must extend the tenure")
	}
}

// TestAcquireOvertakenPostgres checks Acquire when a commit lands between
// its statement's snapshot and its conflict check: another transaction
// inserts the name and commits while the statement waits on that insert.
// The statement sees no row in its snapshot, finds the committed row held
// on conflict, writes nothing, and is sent again; the answer names the
// holder that committed.
func TestAcquireOvertakenPostgres(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.Inspect(ctx, "warm-up"); !errors.Is(err, lease.ErrNotHeld) { // creates the table
		t.Fatal(err)
	}
	name := fmt.Sprintf("hsql/overtaken/%d", time.Now().UnixNano())
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	now := `floor(extract(epoch FROM clock_timestamp())*1000)::bigint`
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+s.table+` (lease_key, name, owner, token, acquired_at, expires_at, host)
SELECT $1::bytea, $2::bytea, 'first', ms*1000, ms, ms + 60000, 'test' FROM (SELECT `+now+` AS ms) n`, key(name), []byte(name)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, name, "second", time.Minute)
		done <- err
	}()
	// Wait, bounded, until the Acquire waits on the uncommitted insert.
	waiting := false
	for i := 0; i < 200 && !waiting; i++ {
		time.Sleep(20 * time.Millisecond)
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%cur AS MATERIALIZED%' AND query LIKE '%' || $1 || '%'`, s.table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		waiting = n > 0
	}
	if !waiting {
		t.Fatal("the Acquire never waited on the uncommitted insert")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Owner != "first" || he.Remaining <= 0 {
		t.Fatalf("Acquire overtaken by a commit: %v; want ErrHeld by first", err)
	}
}

// TestBusyAcquireReadsFirstMySQL checks held.go on MySQL and MariaDB, on
// both Acquire paths (INSERT ... RETURNING, and MySQL 8's transaction):
// once a Locker has seen a name held by another owner, its next Acquires
// of it by anyone but the holder are one SELECT (no upsert, no lock, no
// transaction) that still names the holder and its time, until the
// holder releases (then a SELECT and the takeover, which acquires) or its
// time is up (then the takeover alone). The holder's own Acquire is
// always the takeover. Not parallel: a 300ms tenure must still be held
// at the next call.
func TestBusyAcquireReadsFirstMySQL(t *testing.T) {
	s := mysqlStore(t)
	for _, mysql8 := range []bool{false, true} {
		t.Run(map[bool]string{false: "returning", true: "mysql8-path"}[mysql8], func(t *testing.T) {
			var c counter
			l, err := New(countingDB(t, s, &c), WithTable(s.table))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if mysql8 {
				forceMySQL8Path(t, l)
			}
			holder := s.newLocker(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			name := fmt.Sprintf("hsql/reads-first/%v/%d", mysql8, time.Now().UnixNano())
			held, err := holder.Acquire(ctx, name, "holder", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			// sent runs op and returns the statements it sent, each as
			// its first word, and the number of transactions it began
			// last (if any).
			sent := func(op func()) []string {
				c.take()
				op()
				stmts, txs := c.take()
				var words []string
				for _, st := range stmts {
					words = append(words, strings.ToUpper(strings.Fields(st.query)[0]))
				}
				if txs > 0 {
					words = append(words, fmt.Sprintf("(%d transactions)", txs))
				}
				return words
			}
			busy := func(i int) {
				_, err := l.Acquire(ctx, name, "other", time.Minute)
				var he *lease.HeldError
				if !errors.As(err, &he) || he.Owner != "holder" || he.Remaining <= 0 || he.Remaining > time.Minute {
					t.Fatalf("busy Acquire %d: %v; want ErrHeld by holder with up to a minute left", i, err)
				}
			}
			if _, err := l.Inspect(ctx, name); err != nil { // sets up first
				t.Fatal(err)
			}
			first := sent(func() { busy(0) })
			if len(first) == 0 || first[0] == "SELECT" {
				t.Errorf("first busy Acquire sent %v; want the takeover statement alone (the name was not known held)", first)
			}
			for i := 1; i <= 3; i++ {
				if got := sent(func() { busy(i) }); !slices.Equal(got, []string{"SELECT"}) {
					t.Errorf("busy Acquire %d sent %v; want one SELECT", i, got)
				}
			}
			// Released elsewhere: one read finds it free, the takeover
			// acquires it with a later token.
			if err := holder.Release(ctx, held); err != nil {
				t.Fatal(err)
			}
			var mine lease.Lease
			got := sent(func() {
				if mine, err = l.Acquire(ctx, name, "other", time.Minute); err != nil {
					t.Fatalf("Acquire after the holder released: %v", err)
				}
			})
			if len(got) < 2 || got[0] != "SELECT" || mine.Token <= held.Token {
				t.Errorf("Acquire after the holder released sent %v and got token %d; want a SELECT, then the takeover, and a token above %d", got, mine.Token, held.Token)
			}
			if err := l.Release(ctx, mine); err != nil {
				t.Fatal(err)
			}
			// Held with a short time: once it is up, no read first.
			short, err := holder.Acquire(ctx, name, "holder", 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Acquire(ctx, name, "other", time.Minute); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("Acquire of a name held for 300ms: %v; want ErrHeld", err)
			}
			time.Sleep(400 * time.Millisecond)
			got = sent(func() {
				if mine, err = l.Acquire(ctx, name, "other", time.Minute); err != nil {
					t.Fatalf("Acquire after the holder's time was up: %v", err)
				}
			})
			if len(got) == 0 || got[0] == "SELECT" || mine.Token <= short.Token {
				t.Errorf("Acquire after the holder's time was up sent %v, token %d; want the takeover alone and a token above %d", got, mine.Token, short.Token)
			}
			// The holder's own Acquire is the takeover, even on a Locker
			// that saw the name held.
			if _, err := l.Acquire(ctx, name, "another", time.Minute); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("Acquire of a name other holds: %v; want ErrHeld", err)
			}
			if got := sent(func() {
				if again, err := l.Acquire(ctx, name, "other", time.Minute); err != nil || again.Token != mine.Token {
					t.Fatalf("re-entrant Acquire: %+v, %v; want token %d", again, err, mine.Token)
				}
			}); len(got) == 0 || got[0] == "SELECT" {
				t.Errorf("the holder's re-entrant Acquire sent %v; want the takeover alone", got)
			}
		})
	}
}
