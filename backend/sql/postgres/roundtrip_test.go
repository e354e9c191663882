package postgreslease

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// viaProxy returns LEASE_TEST_POSTGRES rewritten to go through a
// faultproxy (closed when t ends) with table set, the proxy, and drops the
// table when t ends.
func viaProxy(t *testing.T, table string) (string, *faultproxy.Proxy) {
	t.Helper()
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_POSTGRES: %v", err)
	}
	p := faultproxy.StartT(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("table", table)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		db, err := sql.Open("pgx", raw)
		if err == nil {
			_, err = db.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_marks")
			db.Close()
		}
		if err != nil {
			t.Error(err)
		}
	})
	return u.String(), p
}

// TestRenewAfterIdleIsOneRoundTrip checks that a Renew on a connection
// idle for longer than pgx's default ping threshold (1s) costs one round
// trip, not a ping and the statement: lease.Run renews every ttl/3, so
// each of its renewals finds its connection idle that long.
func TestRenewAfterIdleIsOneRoundTrip(t *testing.T) {
	raw, p := viaProxy(t, fmt.Sprintf("hsql_ping_%d", time.Now().UnixNano()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held, err := l.Acquire(ctx, "hsql/ping", lease.NewOwner(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// One Renew first, so that pgx has prepared the statement on the
	// pool's connection (a round trip of its own, once per connection).
	if held, err = l.Renew(ctx, held, time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		time.Sleep(1500 * time.Millisecond)
		before := p.Stats()
		if held, err = l.Renew(ctx, held, time.Minute); err != nil {
			t.Fatal(err)
		}
		d := p.Stats().Sub(before)
		if d.RoundTrips != 1 || d.Accepted != 0 {
			t.Errorf("Renew %d after 1.5s idle: %d round trips on %d new connections; want 1 round trip on the pooled connection",
				i+1, d.RoundTrips, d.Accepted)
		}
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
}
