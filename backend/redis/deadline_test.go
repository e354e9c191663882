package redislease_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/testenv"
)

// faultServer is a server the fault tests run through a proxy: a fresh
// miniredis, or the real server of LEASE_TEST_REDIS under a fresh prefix.
type faultServer struct {
	addr   string   // the server's host:port
	url    *url.URL // the server's URL
	prefix string
}

// urlVia is the server's URL with its address replaced by addr (a proxy)
// and the test's key prefix.
func (s faultServer) urlVia(addr string) string {
	u := *s.url
	u.Host = addr
	q := u.Query()
	q.Set("prefix", s.prefix)
	u.RawQuery = q.Encode()
	return u.String()
}

// clientVia returns a client of the server through addr, with the
// server's URL options changed by edit; it is closed when t ends.
func (s faultServer) clientVia(t *testing.T, addr string, edit func(*redis.Options)) *redis.Client {
	t.Helper()
	u := *s.url
	u.Host = addr
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	edit(opts)
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// faultServers runs fn on miniredis and on the real server (a subtest
// that skips, or fails in CI, when LEASE_TEST_REDIS is unset).
func faultServers(t *testing.T, fn func(t *testing.T, s faultServer)) {
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		mr := miniredis.RunT(t)
		fn(t, faultServer{addr: mr.Addr(), url: &url.URL{Scheme: "redis", Host: mr.Addr(), Path: "/0"}, prefix: randomPrefix("fault")})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		client, raw := realRedis(t, -1)
		prefix := randomPrefix("fault")
		deleteKeys(t, client, prefix)
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "6379")
		}
		fn(t, faultServer{addr: addr, url: u, prefix: prefix})
	})
}

// callBudget is the context each call gets in the deadline tests, and
// callSlack how much later than its deadline a call may return: time for
// the runtime to notice the deadline on a machine loaded by the race
// detector and other tests. The defect it guards against overshot by
// go-redis's read timeout, 5s. The tests that check deadlines this way
// (TestOpenedLockerReturnsByDeadline, TestNewWithContextTimeoutReturnsByDeadline,
// TestOpenOnSilentServerReturnsByDeadline, TestTopologyURLsFollowDeadlines)
// do not call t.Parallel: they run alone, apart from this package's other
// tests, their subtests beside each other only (calls waiting on a
// blackholed or frozen store, which take no CPU).
const (
	callBudget = 300 * time.Millisecond
	callSlack  = 400 * time.Millisecond
)

// checkReturnsByDeadline calls call with a context of callBudget and fails
// t unless it returns by the deadline (+ callSlack) with an error that
// matches context.DeadlineExceeded and none of the lease outcomes.
func checkReturnsByDeadline(t *testing.T, op string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBudget)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	elapsed := time.Since(start)
	t.Logf("%-12s returned after %4dms: %v", op, elapsed.Milliseconds(), err)
	if err == nil {
		t.Errorf("%s on a blackholed store succeeded", op)
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: error %v does not match context.DeadlineExceeded", op, err)
	}
	for _, s := range []error{lease.ErrHeld, lease.ErrLost, lease.ErrNotHeld, lease.ErrInvalid} {
		if errors.Is(err, s) {
			t.Errorf("%s: a store that does not answer reads as %v: %v", op, s, err)
		}
	}
	if elapsed > callBudget+callSlack {
		t.Errorf("%s returned %s after its %s deadline; want at most %s", op, elapsed-callBudget, callBudget, callSlack)
	}
}

// checkEveryCallReturnsByDeadline acquires a lease on l through p, then
// blackholes p and runs every operation with a short deadline.
func checkEveryCallReturnsByDeadline(t *testing.T, l *redislease.Locker, p *faultProxy) {
	t.Helper()
	held, err := l.Acquire(context.Background(), "jobs/x", "owner", time.Minute)
	if err != nil {
		t.Fatalf("Acquire before the blackhole: %v", err)
	}
	p.Blackhole()
	checkReturnsByDeadline(t, "Acquire", func(ctx context.Context) error {
		_, err := l.Acquire(ctx, "jobs/y", "owner", time.Minute)
		return err
	})
	checkReturnsByDeadline(t, "Renew", func(ctx context.Context) error {
		_, err := l.Renew(ctx, held, time.Minute)
		return err
	})
	checkReturnsByDeadline(t, "RenewBatch", func(ctx context.Context) error {
		res := batchtest.RenewBatch(ctx, l, []batchtest.Req{{Lease: held, TTL: time.Minute}, {Lease: held, TTL: time.Minute}})
		return errors.Join(res[0].Err, res[1].Err)
	})
	checkReturnsByDeadline(t, "Release", func(ctx context.Context) error {
		return l.Release(ctx, held)
	})
	checkReturnsByDeadline(t, "Inspect", func(ctx context.Context) error {
		_, err := l.Inspect(ctx, "jobs/x")
		return err
	})
	checkReturnsByDeadline(t, "List", func(ctx context.Context) error {
		_, err := l.List(ctx, "")
		return err
	})
	checkReturnsByDeadline(t, "ForceRelease", func(ctx context.Context) error {
		_, err := l.ForceRelease(ctx, "jobs/x")
		return err
	})
}

// TestOpenedLockerReturnsByDeadline blackholes the store under a Locker
// that Open made (issue 9, defect 1): every call must return by its
// context's deadline, not by go-redis's read timeout. So must Open itself
// on a store that accepts connections and never answers (defect 8).
func TestOpenedLockerReturnsByDeadline(t *testing.T) {
	testenv.Slow(t)
	faultServers(t, func(t *testing.T, s faultServer) {
		p := startProxy(t, s.addr)
		l, err := redislease.Open(context.Background(), s.urlVia(p.Addr()))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		checkEveryCallReturnsByDeadline(t, l, p)

		checkReturnsByDeadline(t, "Open", func(ctx context.Context) error {
			l, err := redislease.Open(ctx, s.urlVia(p.Addr()))
			if err == nil {
				l.Close()
			}
			return err
		})
		checkReturnsByDeadline(t, "lease.Open", func(ctx context.Context) error {
			l, err := lease.Open(ctx, s.urlVia(p.Addr()))
			if err == nil {
				l.Close()
			}
			return err
		})
	})
}

// TestOpenOnSilentServerReturnsByDeadline opens a store that accepts
// connections and never answers, from the first byte (defect 8).
func TestOpenOnSilentServerReturnsByDeadline(t *testing.T) {
	addr := silentServer(t)
	checkReturnsByDeadline(t, "Open", func(ctx context.Context) error {
		l, err := redislease.Open(ctx, "redis://"+addr+"/0")
		if err == nil {
			l.Close()
		}
		return err
	})
}

// TestNewWithContextTimeoutReturnsByDeadline is what New's documentation
// promises: a user's client with ContextTimeoutEnabled returns by the
// context's deadline.
func TestNewWithContextTimeoutReturnsByDeadline(t *testing.T) {
	testenv.Slow(t)
	faultServers(t, func(t *testing.T, s faultServer) {
		p := startProxy(t, s.addr)
		client := s.clientVia(t, p.Addr(), func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		checkEveryCallReturnsByDeadline(t, mustNew(t, client, redislease.WithPrefix(s.prefix)), p)
	})
}

// TestNewWithoutContextTimeoutWaitsForReadTimeout is the other half of
// New's documentation: without ContextTimeoutEnabled, go-redis's
// ReadTimeout bounds a call instead of its context, and the error still
// matches context.DeadlineExceeded.
func TestNewWithoutContextTimeoutWaitsForReadTimeout(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	p := startProxy(t, mr.Addr())
	const readTimeout = time.Second
	client := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: readTimeout})
	defer client.Close()
	l := mustNew(t, client)
	if _, err := l.Inspect(context.Background(), "jobs/x"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect before the blackhole: %v", err)
	}
	p.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), callBudget)
	defer cancel()
	start := time.Now()
	_, err := l.Inspect(ctx, "jobs/x")
	elapsed := time.Since(start)
	t.Logf("Inspect returned after %dms: %v", elapsed.Milliseconds(), err)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect: %v; want an error matching context.DeadlineExceeded", err)
	}
	if elapsed < readTimeout-50*time.Millisecond {
		t.Fatalf("Inspect returned after %s, before the read timeout of %s: the client follows context deadlines after all, so New's documentation is wrong", elapsed, readTimeout)
	}
}
