package mysqllease

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// TestRenewAfterIdleIsOneRoundTrip checks that a Renew on a connection
// idle for a while costs one round trip on MySQL/MariaDB: go-sql-driver
// checks a pooled connection's liveness with a non-blocking read of its
// socket (checkConnLiveness), sending nothing, unlike pgx's stdlib, which
// pings (see backend/sql/postgres).
func TestRenewAfterIdleIsOneRoundTrip(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_MYSQL: %v", err)
	}
	host := u.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "3306")
	}
	p := faultproxy.StartT(t, host)
	table := fmt.Sprintf("hsql_ping_%d", time.Now().UnixNano())
	u.Host = p.Addr()
	u.RawQuery = "table=" + table
	t.Cleanup(func() {
		cfg, err := config(u, u.Query())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Addr = host // directly, not through the proxy
		c, err := mysql.NewConnector(cfg)
		if err == nil {
			db := sql.OpenDB(c)
			_, err = db.Exec("DROP TABLE IF EXISTS " + table)
			db.Close()
		}
		if err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held, err := l.Acquire(ctx, "hsql/ping", lease.NewOwner(), time.Minute)
	if err != nil {
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
