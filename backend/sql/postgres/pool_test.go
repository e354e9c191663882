package postgreslease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/internal/testenv"
)

// TestPoolBoundOnBurst checks that a burst of 64 concurrent Acquires on a
// Locker that Open built opens at most the pool's bound of connections
// to the server: DefaultMaxOpenConns, or the URL's max_conns. Every
// Acquire is made to wait on a table lock held by another connection, so
// each holds its connection while the server counts them
// (pg_stat_activity, by the Locker's application_name).
func TestPoolBoundOnBurst(t *testing.T) {
	for _, c := range []struct {
		params string
		bound  int
	}{
		{"", sqllease.DefaultMaxOpenConns},
		{"&max_conns=5&max_idle_conns=2", 5},
	} {
		t.Run(fmt.Sprint(c.bound), func(t *testing.T) { checkPoolBound(t, c.params, c.bound) })
	}
}

func checkPoolBound(t *testing.T, params string, bound int) {
	const burst = 64
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	admin, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	stamp := time.Now().UnixNano()
	table, app := fmt.Sprintf("hsql_pool_%d", stamp), fmt.Sprintf("hsql_pool_%d", stamp)
	defer func() {
		if _, err := admin.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_marks"); err != nil {
			t.Error(err)
		}
	}()
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set("table", table)
	q.Set("application_name", app)
	u.RawQuery = q.Encode() + params

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := lease.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Inspect(ctx, "warm-up"); !errors.Is(err, lease.ErrNotHeld) { // creates the table
		t.Fatal(err)
	}

	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, "LOCK TABLE "+table+" IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	conns := func() int {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	blocked := func() int {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Acquires leave an eighth of the pool, at least two connections, to
	// renewals and releases (see the sqllease package documentation).
	acquires := bound - max(2, bound/8)
	errs := make(chan error, burst)
	var wg sync.WaitGroup
	acquire := func(i int) {
		wg.Go(func() {
			_, err := l.Acquire(ctx, fmt.Sprintf("hsql/pool/%d", i), "burst", time.Minute)
			errs <- err
		})
	}
	// Acquires that wait for a connection together share a statement
	// (they are combined), so a burst that arrives at once needs only a
	// few connections. To fill the pool, the first Acquires arrive one
	// at a time, each after the one before is blocked on the lock in a
	// statement of its own (bounded: 2s each); the rest then arrive at
	// once, and must wait for a connection, not open more.
	for i := range acquires {
		acquire(i)
		for deadline := time.Now().Add(2 * time.Second); blocked() <= i && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := acquires; i < burst; i++ {
		acquire(i)
	}
	// Wait, bounded in count and time, until the Acquires' connections
	// are open or the count stops growing, then look once more: with the
	// bound, no count can exceed it however long we wait.
	most, last, still := 0, -1, 0
	for i := 0; i < 400 && still < 10; i++ {
		time.Sleep(50 * time.Millisecond)
		n := conns()
		most = max(most, n)
		if n == last && n >= acquires {
			still++
		} else {
			still = 0
		}
		last = n
	}
	t.Logf("max_conns %d: %d server connections at most while %d Acquires waited", bound, most, burst)
	if most > acquires {
		t.Errorf("%d concurrent Acquires opened %d connections; want at most %d of the pool's %d", burst, most, acquires, bound)
	}
	if most < acquires {
		t.Errorf("%d concurrent Acquires opened only %d connections; want their share of the pool, %d (did they wait on the lock?)", burst, most, acquires)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Acquire in the burst: %v", err)
		}
	}
}

// TestPoolParamsRefused checks that bad max_conns and max_idle_conns are
// refused before connecting, with an error naming the parameter.
func TestPoolParamsRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ query, param string }{
		{"max_conns=0", "max_conns"},
		{"max_conns=-3", "max_conns"},
		{"max_conns=many", "max_conns"},
		{"max_idle_conns=-1", "max_idle_conns"},
		{"max_idle_conns=x", "max_idle_conns"},
		{"max_conns=4&max_idle_conns=5", "max_idle_conns"},
		{"max_idle_conns=33", "max_idle_conns"},
		{"max_conns=4&max_conns=5", "max_conns"},
	} {
		raw := "postgres://u@127.0.0.1:1/db?sslmode=disable&" + c.query
		for name, open := range map[string]func() error{
			"Open":       func() error { _, err := Open(ctx, raw); return err },
			"lease.Open": func() error { _, err := lease.Open(ctx, raw); return err },
		} {
			err := open()
			if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.param) {
				t.Errorf("%s(%s): %v; want ErrInvalid naming %s", name, c.query, err, c.param)
			}
		}
	}
}
