package faultproxy_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// realPostgres returns the configuration of the server in
// LEASE_TEST_POSTGRES (or skips t), a direct connection, and a fresh table
// (n int) dropped when t ends.
func realPostgres(t *testing.T) (*pgx.ConnConfig, *pgx.Conn, string) {
	t.Helper()
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_POSTGRES: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	direct, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("LEASE_TEST_POSTGRES: %v", err)
	}
	table := randomName("faultproxy_")
	if _, err := direct.Exec(ctx, "create table "+table+" (n int)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = direct.Exec(ctx, "drop table if exists "+table)
		_ = direct.Close(ctx)
	})
	return cfg, direct, table
}

// connectVia connects to the same server through p, closed when t ends.
func connectVia(ctx context.Context, cfg *pgx.ConnConfig, p *faultproxy.Proxy) (*pgx.Conn, error) {
	c := cfg.Copy()
	host, port, _ := net.SplitHostPort(p.Addr())
	c.Host = host
	c.Port = uint16(atoi(port))
	c.Fallbacks = nil
	c.ConnectTimeout = 0
	return pgx.ConnectConfig(ctx, c)
}

func mustConnectVia(t *testing.T, cfg *pgx.ConnConfig, p *faultproxy.Proxy) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := connectVia(ctx, cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

// count returns how many rows table holds, read directly.
func count(t *testing.T, direct *pgx.Conn, table string) int {
	t.Helper()
	var n int
	if err := direct.QueryRow(context.Background(), "select count(*) from "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresBlackhole: pgx returns by a 300ms deadline when the proxy is
// blackholed, on an open connection and when connecting.
func TestPostgresBlackhole(t *testing.T) {
	cfg, _, _ := realPostgres(t)
	p := faultproxy.StartT(t, net.JoinHostPort(cfg.Host, itoa(int(cfg.Port))))
	c := mustConnectVia(t, cfg, p)
	ctx := context.Background()
	if _, err := c.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	p.Stall(faultproxy.Both)

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	_, err := c.Exec(cctx, "select 1")
	cancel()
	checkByDeadline(t, "a query on an open connection", err, time.Since(start))

	cctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	start = time.Now()
	c2, err := connectVia(cctx, cfg, p)
	cancel()
	if err == nil {
		_ = c2.Close(ctx)
	}
	checkByDeadline(t, "connecting", err, time.Since(start))
}

// TestPostgresLostReply: the insert whose reply is lost is committed; the
// client sees a broken connection (ThenReset) or its deadline (ThenStall).
func TestPostgresLostReply(t *testing.T) {
	cfg, direct, table := realPostgres(t)
	p := faultproxy.StartT(t, net.JoinHostPort(cfg.Host, itoa(int(cfg.Port))))
	isInsert := func(req []byte) bool { return strings.Contains(string(req), "insert into "+table) }
	ctx := context.Background()
	insert := "insert into " + table + " values (1)"

	c := mustConnectVia(t, cfg, p)
	p.LoseReplyTo(isInsert, faultproxy.ThenReset)
	_, err := c.Exec(ctx, "select 1") // not lost: it does not match
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, insert, pgx.QueryExecModeSimpleProtocol)
	checkBroken(t, "insert whose reply is lost (then reset)", c, err)
	if n := count(t, direct, table); n != 1 {
		t.Fatalf("table holds %d rows after the lost insert, want 1: the insert must be applied", n)
	}

	c = mustConnectVia(t, cfg, p)
	p.LoseReplyTo(isInsert, faultproxy.ThenStall)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	_, err = c.Exec(cctx, insert, pgx.QueryExecModeSimpleProtocol)
	cancel()
	checkByDeadline(t, "insert whose reply is lost (then stall)", err, time.Since(start))
	if n := count(t, direct, table); n != 2 {
		t.Fatalf("table holds %d rows after the second lost insert, want 2", n)
	}
}

// TestPostgresReset: a query in flight when the proxy resets fails with
// ECONNRESET after the server applied it.
func TestPostgresReset(t *testing.T) {
	cfg, direct, table := realPostgres(t)
	p := faultproxy.StartT(t, net.JoinHostPort(cfg.Host, itoa(int(cfg.Port))))
	c := mustConnectVia(t, cfg, p)
	ctx := context.Background()
	p.Stall(faultproxy.ToClient)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "insert into "+table+" values (1)", pgx.QueryExecModeSimpleProtocol)
		errc <- err
	}()
	waitFor(t, "the insert to be committed", func() bool { return count(t, direct, table) == 1 })
	p.Reset()
	checkBroken(t, "insert in flight during Reset", c, <-errc)
}

// checkBroken checks that a pgx call failed on a broken connection. pgx
// closes the connection on the ECONNRESET and then reports "conn closed"
// without the cause, so the test checks the outcome (TestReset checks the
// ECONNRESET itself on a plain TCP client).
func checkBroken(t *testing.T, what string, c *pgx.Conn, err error) {
	t.Helper()
	if err == nil || isTimeout(err) || !c.IsClosed() {
		t.Errorf("%s: err = %v, closed = %v; want the connection broken", what, err, c.IsClosed())
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
