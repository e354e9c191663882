package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/sql/internal/sqltest"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// callTimeout is the context the fault tests give each call, and
// callSlack how much later than its deadline a call may return: the
// drivers notice a deadline at once, the slack is for a loaded machine.
const (
	callTimeout = 300 * time.Millisecond
	callSlack   = 400 * time.Millisecond
)

// checkTimedOut fails t unless a call that took elapsed and returned err
// ended by its deadline with an error matching the context's, and no
// lease outcome.
func checkTimedOut(t *testing.T, op string, elapsed time.Duration, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s succeeded against a server that does not answer", op)
	case errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld):
		t.Errorf("%s: %v: a store that does not answer is reported as a lease outcome", op, err)
	case !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("%s: %v, want an error matching context.DeadlineExceeded", op, err)
	}
	if elapsed > callTimeout+callSlack {
		t.Errorf("%s returned %s after it started, with a %s context (allowed: %s)", op, elapsed, callTimeout, callTimeout+callSlack)
	}
	t.Logf("%-14s returned after %4dms: %v", op, elapsed.Milliseconds(), err)
}

// timed runs fn with a callTimeout context and returns how long it took.
func timed(fn func(ctx context.Context) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	return time.Since(start), err
}

// TestSetupWaitEndsWithContext checks that a call waiting for another
// call's setup (the catalog check, here on a server that never answers)
// gives up when its own context ends, not when the other call's does.
// Not parallel: it bounds how late after its deadline the call returns.
func TestSetupWaitEndsWithContext(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://app@" + sqltest.Silent(t) + "/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	l, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	long, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := l.Acquire(long, "a", "owner", time.Minute)
		first <- err
	}()
	// Wait, bounded, until the first call is setting up (holds the setup
	// slot), so that the second waits for it.
	for deadline := time.Now().Add(5 * time.Second); len(l.s.setupSlot) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first call did not start setting up within 5s")
		}
	}
	elapsed, err := timed(func(ctx context.Context) error {
		_, err := l.Inspect(ctx, "a")
		return err
	})
	checkTimedOut(t, "Inspect", elapsed, err)
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the first call: %v, want context.Canceled", err)
	}
}

// faultStores are the server dialects, with a pool that dials through a
// fault proxy instead of the server.
var faultStores = []struct {
	name    string
	through func(t *testing.T) (*testStore, *faultproxy.Proxy)
}{
	{"postgresql", func(t *testing.T) (*testStore, *faultproxy.Proxy) {
		u, err := url.Parse(testenv.Lookup(t, "LEASE_TEST_POSTGRES"))
		if err != nil {
			t.Fatal(err)
		}
		p := faultproxy.StartT(t, u.Host)
		u.Host = p.Addr()
		return serverStore(t, PostgreSQL, postgresConnector(t, u.String(), nil)), p
	}},
	{"mysql", func(t *testing.T) (*testStore, *faultproxy.Proxy) {
		cfg := mysqlConfig(t, testenv.Lookup(t, "LEASE_TEST_MYSQL"))
		p := faultproxy.StartT(t, cfg.Addr)
		cfg.Addr = p.Addr()
		return serverStore(t, MySQL, mysqlConnector(t, cfg)), p
	}},
}

// warmLocker returns a Locker on s with one pooled connection, holding
// the names given, on which Release has run before: pgx prepares a
// statement the first time a connection runs it, and a Release under
// test must reach the database in one request, so that only its reply is
// lost.
func warmLocker(t *testing.T, s *testStore, names ...string) *Locker {
	t.Helper()
	s.db.SetMaxOpenConns(1)
	l := s.newLocker(t)
	ctx := context.Background()
	warm, err := l.Acquire(ctx, "warm", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, warm); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := l.Acquire(ctx, name, "a", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestCallsEndWithContextWhenRepliesStop checks, through a proxy that
// stops passing the server's replies on, that every operation returns by
// its context's deadline with a context error (issue 9: every call
// returns by its deadline), and that a Release whose reply was lost is a
// timeout, not ErrLost, though the database did release the tenure.
// Not parallel, since it bounds how late after its deadline each call
// returns: it runs before the parallel tests, its two dialects (which
// only wait) side by side.
func TestCallsEndWithContextWhenRepliesStop(t *testing.T) {
	for _, fs := range faultStores {
		t.Run(fs.name, func(t *testing.T) {
			t.Parallel()
			s, proxy := fs.through(t)
			l := warmLocker(t, s, "held", "other")
			ctx := context.Background()
			held, err := l.Inspect(ctx, "held")
			if err != nil {
				t.Fatal(err)
			}

			// Release goes first, on the pooled connection, so that its
			// statement reaches the database; the calls after it need a
			// new connection, whose handshake gets no answer.
			proxy.Stall(faultproxy.ToClient)
			ops := []struct {
				op string
				fn func(ctx context.Context) error
			}{
				{"Release", func(ctx context.Context) error { return l.Release(ctx, held) }},
				{"Acquire", func(ctx context.Context) error { _, err := l.Acquire(ctx, "new", "b", time.Minute); return err }},
				{"Acquire held", func(ctx context.Context) error { _, err := l.Acquire(ctx, "held", "b", time.Minute); return err }},
				{"Renew", func(ctx context.Context) error { _, err := l.Renew(ctx, held, time.Minute); return err }},
				{"Inspect", func(ctx context.Context) error { _, err := l.Inspect(ctx, "held"); return err }},
				{"List", func(ctx context.Context) error { _, err := l.List(ctx, ""); return err }},
				{"ForceRelease", func(ctx context.Context) error { _, err := l.ForceRelease(ctx, "other"); return err }},
				{"Cleanup", func(ctx context.Context) error { _, err := l.Cleanup(ctx, time.Hour); return err }},
			}
			for _, o := range ops {
				elapsed, err := timed(o.fn)
				checkTimedOut(t, o.op, elapsed, err)
			}

			// The Release statement reached the database; only its
			// reply was lost.
			if err := proxy.Clear(); err != nil {
				t.Fatal(err)
			}
			if got, err := l.Inspect(ctx, "held"); !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("after the Release whose reply was lost: Inspect = %v, %v; want ErrNotHeld (the database released it)", got, err)
			}
		})
	}
}

// TestLostReleaseReplyIsNotLost loses the reply to a Release that the
// database applied and resets the connection (issue 9, defect 5). Had
// anything sent the statement again on a new connection, the resend would
// find the tenure gone and report ErrLost: the Release must return the
// driver's error instead, at once, and the tenure must be released.
func TestLostReleaseReplyIsNotLost(t *testing.T) {
	t.Parallel()
	for _, fs := range faultStores {
		t.Run(fs.name, func(t *testing.T) {
			t.Parallel()
			s, proxy := fs.through(t)
			s.db.SetMaxOpenConns(2) // room for a resend on a new connection
			l := warmLocker(t, s, "held")
			ctx := context.Background()
			held, err := l.Inspect(ctx, "held")
			if err != nil {
				t.Fatal(err)
			}
			before := proxy.Stats()
			proxy.LoseReplies(1, faultproxy.ThenReset)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			err = l.Release(rctx, held)
			switch {
			case err == nil:
				t.Fatal("Release succeeded though its reply was lost")
			case errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrHeld):
				t.Fatalf("Release whose reply was lost: %v; want the driver's error, not a lease outcome", err)
			case errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("Release whose reply was lost and connection reset: %v; want the driver's error at once", err)
			}
			t.Logf("Release: %v", err)
			if st := proxy.Stats().Sub(before); st.LostReplies != 1 {
				t.Fatalf("the proxy lost %d replies, want 1", st.LostReplies)
			}
			if got, err := l.Inspect(ctx, "held"); !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("after the Release whose reply was lost: Inspect = %v, %v; want ErrNotHeld (the database released it)", got, err)
			}
		})
	}
}

// TestOperationsOnSilentServer checks that each operation of a Locker on
// a pool whose server accepts connections and never answers returns by
// its context's deadline: here the first statement never gets a
// connection, so setup is what must give up. Not parallel, since it
// bounds how late after its deadline each call returns: it runs before
// the parallel tests, its two dialects (which only wait) side by side.
func TestOperationsOnSilentServer(t *testing.T) {
	testenv.Slow(t)
	addr := sqltest.Silent(t)
	pools := map[string]*sql.DB{}
	cfg, err := pgx.ParseConfig("postgres://app@" + addr + "/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	pools["postgresql"] = stdlib.OpenDB(*cfg)
	mcfg := mysqlConfig(t, "mysql://app@"+addr+"/db")
	pools["mysql"] = sql.OpenDB(mysqlConnector(t, mcfg))
	for name, db := range pools {
		// Closed by the test, not the subtest: a -run pattern that
		// selects no subtest would leave the pools' goroutines behind.
		t.Cleanup(func() { _ = db.Close() })
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, err := New(db)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ls := lease.Lease{Name: "x", Owner: "a", Token: 1}
			for _, o := range []struct {
				op string
				fn func(ctx context.Context) error
			}{
				{"Acquire", func(ctx context.Context) error { _, err := l.Acquire(ctx, "x", "a", time.Minute); return err }},
				{"Renew", func(ctx context.Context) error { _, err := l.Renew(ctx, ls, time.Minute); return err }},
				{"Release", func(ctx context.Context) error { return l.Release(ctx, ls) }},
				{"Inspect", func(ctx context.Context) error { _, err := l.Inspect(ctx, "x"); return err }},
			} {
				elapsed, err := timed(o.fn)
				checkTimedOut(t, o.op, elapsed, err)
			}
		})
	}
}
