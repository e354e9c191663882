package redislease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.DefaultParallel(minParallel)
	goleak.VerifyTestMain(m)
}

// minParallel is how many tests of this package run at once (t.Parallel)
// unless -parallel says otherwise. go test's default is GOMAXPROCS, two
// on a 2-CPU machine, but these tests mostly wait: on real ttls, on
// private servers starting, on failovers and on connections that never
// answer, not on the CPU. The tests whose assertions are about timing
// under load do not call t.Parallel, so they run alone.
const minParallel = 16

// randomPrefix returns a key prefix no other test run uses.
func randomPrefix(label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "leasetest:" + label + ":" + hex.EncodeToString(b[:]) + ":"
}

// newMiniredis starts a miniredis whose TTLs and TIME both follow a manual
// clock, and returns it with a client and a function that moves the clock.
func newMiniredis(t testing.TB) (*miniredis.Miniredis, *redis.Client, func(time.Duration)) {
	t.Helper()
	mr := miniredis.RunT(t)
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	mr.SetTime(now)
	mr.ClockTTL(true)
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
		mr.SetTime(now)
	}
	return mr, newClient(t, mr.Addr()), advance
}

// newClient returns a client for a host:port, closed when t ends.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// realRedis returns a client for the server in LEASE_TEST_REDIS (skipping
// t when it is unset), on database db when db >= 0, closed when t ends.
func realRedis(t testing.TB, db int) (*redis.Client, string) {
	t.Helper()
	raw := testenv.Lookup(t, "LEASE_TEST_REDIS")
	if db >= 0 {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("LEASE_TEST_REDIS=%q: %v", raw, err)
		}
		u.Path = "/" + itoa(db)
		raw = u.String()
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_REDIS=%q: %v", raw, err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("LEASE_TEST_REDIS=%q: %v", raw, err)
	}
	return c, raw
}

// deleteKeys removes every key under prefix when t ends.
func deleteKeys(t testing.TB, c *redis.Client, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("scanning keys under %q: %v", prefix, err)
			return
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
				t.Errorf("deleting keys under %q: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
}

func globEscape(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
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

// mustNew is redislease.New, failing t on an error.
func mustNew(t testing.TB, client redis.UniversalClient, opts ...redislease.Option) *redislease.Locker {
	t.Helper()
	l, err := redislease.New(client, opts...)
	if err != nil {
		t.Fatalf("redislease.New: %v", err)
	}
	return l
}
