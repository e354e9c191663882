package faultproxy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// deadlineSlack is how late past its context's deadline a call may return
// on a loaded 2-CPU machine and still count as "by the deadline".
const deadlineSlack = 1500 * time.Millisecond

// randomName returns a name no other test run uses.
func randomName(label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return label + hex.EncodeToString(b[:])
}

// realRedis returns the options of the server in LEASE_TEST_REDIS (or
// skips t), a direct client to it, and a fresh key deleted when t ends.
func realRedis(t *testing.T) (*redis.Options, *redis.Client, string) {
	t.Helper()
	raw := testenv.Lookup(t, "LEASE_TEST_REDIS")
	opts, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_REDIS=%q: %v", raw, err)
	}
	direct := redis.NewClient(opts)
	key := randomName("faultproxy:test:")
	t.Cleanup(func() {
		_ = direct.Del(context.Background(), key).Err()
		_ = direct.Close()
	})
	return opts, direct, key
}

// proxied returns a client of the same server through p that honours
// context deadlines and never resends a command, with one pooled
// connection, closed when t ends. It speaks RESP2: under RESP3, go-redis
// peeks at the socket for push notifications before reading a reply, and
// the peek consumes a reset, so the read that follows reports EOF where
// RESP2 reports ECONNRESET.
func proxied(t *testing.T, opts *redis.Options, p *faultproxy.Proxy) *redis.Client {
	t.Helper()
	o := *opts
	o.Addr = p.Addr()
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.PoolSize = 1
	o.Protocol = 2
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// isTimeout reports whether err is a deadline: the context's or the
// connection's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// checkByDeadline checks that a call given a 300ms context failed with a
// timeout and returned by its deadline.
func checkByDeadline(t *testing.T, what string, err error, took time.Duration) {
	t.Helper()
	const d = 300 * time.Millisecond
	if err == nil || !isTimeout(err) {
		t.Errorf("%s: err = %v, want a deadline error", what, err)
	}
	if took < d-10*time.Millisecond || took > d+deadlineSlack {
		t.Errorf("%s returned after %s with a %s context, want about %s", what, took, d, d)
	}
}

// TestRedisBlackhole: a go-redis client that honours contexts returns by
// a 300ms deadline when the proxy is blackholed, on a pooled connection and
// on a new one.
func TestRedisBlackhole(t *testing.T) {
	opts, _, key := realRedis(t)
	p := faultproxy.StartT(t, opts.Addr)
	c := proxied(t, opts, p)
	ctx := context.Background()
	if err := c.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	p.Stall(faultproxy.Both)

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	err := c.Get(cctx, key).Err()
	cancel()
	checkByDeadline(t, "GET on a pooled connection", err, time.Since(start))

	fresh := proxied(t, opts, p)
	cctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	start = time.Now()
	err = fresh.Get(cctx, key).Err()
	cancel()
	checkByDeadline(t, "GET on a new connection", err, time.Since(start))

	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	if v, err := fresh.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET after Clear = %q, %v; want %q", v, err, "v")
	}
}

// TestRedisReset: a command in flight when the proxy resets fails with
// ECONNRESET; the server had applied it; the pool recovers.
func TestRedisReset(t *testing.T) {
	opts, direct, key := realRedis(t)
	p := faultproxy.StartT(t, opts.Addr)
	c := proxied(t, opts, p)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.Stall(faultproxy.ToClient)
	errc := make(chan error, 1)
	go func() { errc <- c.Incr(ctx, key).Err() }()
	waitFor(t, "the INCR to be applied", func() bool { return direct.Get(ctx, key).Val() == "1" })
	p.Reset()
	if err := <-errc; !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("INCR in flight during Reset: %v, want ECONNRESET", err)
	}
	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Incr(ctx, key).Result(); err != nil || n != 2 {
		t.Fatalf("INCR after the reset = %d, %v; want 2", n, err)
	}
}

// TestRedisLostReply: the server applies the command whose reply is lost;
// the client gets ECONNRESET (ThenReset) or its deadline (ThenStall), and
// never the reply.
func TestRedisLostReply(t *testing.T) {
	opts, direct, key := realRedis(t)
	p := faultproxy.StartT(t, opts.Addr)
	c := proxied(t, opts, p)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	isIncr := func(req []byte) bool {
		s := strings.ToLower(string(req))
		return strings.Contains(s, "incr") && strings.Contains(s, key)
	}

	p.LoseReplyTo(isIncr, faultproxy.ThenReset)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("a PING before the INCR lost its reply: %v", err)
	}
	err := c.Incr(ctx, key).Err()
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("INCR whose reply is lost (then reset): %v, want ECONNRESET", err)
	}
	if v := direct.Get(ctx, key).Val(); v != "1" {
		t.Fatalf("the server holds %q after the lost INCR, want 1: the request must reach it", v)
	}

	p.LoseReplyTo(isIncr, faultproxy.ThenStall)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	err = c.Incr(cctx, key).Err()
	cancel()
	checkByDeadline(t, "INCR whose reply is lost (then stall)", err, time.Since(start))
	if v := direct.Get(ctx, key).Val(); v != "2" {
		t.Fatalf("the server holds %q after the second lost INCR, want 2", v)
	}
	if s := p.Stats(); s.LostReplies != 2 {
		t.Errorf("LostReplies = %d, want 2", s.LostReplies)
	}
}

// TestRedisLostReplyResent shows what issue 9's defect 5 is made of: a
// client that retries on a broken connection (go-redis's default) resends
// the command whose reply was lost, so the server applies it twice and
// the caller sees only the second outcome.
func TestRedisLostReplyResent(t *testing.T) {
	opts, direct, key := realRedis(t)
	p := faultproxy.StartT(t, opts.Addr)
	o := *opts
	o.Addr = p.Addr()
	o.MaxRetries = 3
	o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, time.Millisecond
	c := redis.NewClient(&o)
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	// LoseReplies(1, ...) would lose the reply to the connection's HELLO,
	// the first request a new go-redis connection sends.
	p.LoseReplyTo(func(req []byte) bool { return strings.Contains(strings.ToLower(string(req)), "incr") }, faultproxy.ThenReset)
	n, err := c.Incr(ctx, key).Result()
	if err != nil || n != 2 {
		t.Fatalf("INCR through one lost reply with retries = %d, %v; want 2 (applied twice)", n, err)
	}
	if v := direct.Get(ctx, key).Val(); v != "2" {
		t.Fatalf("server holds %q, want 2", v)
	}
}

// TestRedisRoundTrips: round trips per command through a warmed pool are
// one, and a pipeline of ten commands is one.
func TestRedisRoundTrips(t *testing.T) {
	opts, _, key := realRedis(t)
	p := faultproxy.StartT(t, opts.Addr)
	c := proxied(t, opts, p)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil { // connection set-up (HELLO...) happens here
		t.Fatal(err)
	}
	before := p.Stats()
	for range 5 {
		if err := c.Incr(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if d := p.Stats().Sub(before); d.RoundTrips != 5 || d.Accepted != 0 {
		t.Errorf("5 INCRs on a warm pool: %+v, want 5 round trips and no new connection", d)
	}
	pipeline := func() {
		t.Helper()
		_, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for range 10 {
				pl.Incr(ctx, key)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	pipeline() // go-redis may dial a connection for its first pipeline
	before = p.Stats()
	pipeline()
	if d := p.Stats().Sub(before); d.RoundTrips != 1 || d.Accepted != 0 {
		t.Errorf("a pipeline of 10 INCRs: %+v, want 1 round trip on a warm pool", d)
	}
}
