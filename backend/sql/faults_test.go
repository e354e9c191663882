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
	time.Sleep(50 * time.Millisecond) // let the first call start setting up
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

// faultStores are the server dialects with a connector that dials
// through p instead of the server.
var faultStores = []struct {
	name    string
	through func(t *testing.T, p func(target string) string) *testStore
}{
	{"postgresql", func(t *testing.T, p func(string) string) *testStore {
		raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = p(u.Host)
		return serverStore(t, PostgreSQL, postgresConnector(t, u.String(), nil))
	}},
	{"mysql", func(t *testing.T, p func(string) string) *testStore {
		cfg := mysqlConfig(t, testenv.Lookup(t, "LEASE_TEST_MYSQL"))
		cfg.Addr = p(cfg.Addr)
		return serverStore(t, MySQL, mysqlConnector(t, cfg))
	}},
}

// TestCallsEndWithContextWhenRepliesStop checks, through a proxy that
// stops passing the server's replies on, that every operation returns by
// its context's deadline with a context error (issue 9: every call
// returns by its deadline), and that a Release whose reply was lost is a
// timeout, not ErrLost, though the database did release the tenure
// (issue 9, defect 5: nothing sends it again).
func TestCallsEndWithContextWhenRepliesStop(t *testing.T) {
	for _, fs := range faultStores {
		t.Run(fs.name, func(t *testing.T) {
			var proxy *sqltest.Proxy
			s := fs.through(t, func(target string) string {
				proxy = sqltest.NewProxy(t, target)
				return proxy.Addr()
			})
			// One connection, on which Release has run before: pgx
			// prepares a statement the first time a connection runs it,
			// and the Release below must reach the database as a
			// statement, losing only its reply.
			s.db.SetMaxOpenConns(1)
			l := s.newLocker(t)
			ctx := context.Background()
			for _, name := range []string{"held", "other", "warm"} {
				if _, err := l.Acquire(ctx, name, "a", time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			warm, _ := l.Inspect(ctx, "warm")
			if err := l.Release(ctx, warm); err != nil {
				t.Fatal(err)
			}
			held, err := l.Inspect(ctx, "held")
			if err != nil {
				t.Fatal(err)
			}

			// Release goes first, on the pooled connection, so that its
			// statement reaches the database; the calls after it need a
			// new connection, whose handshake gets no answer.
			proxy.DropReplies(true)
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
			proxy.DropReplies(false)
			if got, err := l.Inspect(ctx, "held"); !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("after the Release whose reply was lost: Inspect = %v, %v; want ErrNotHeld (the database released it)", got, err)
			}
		})
	}
}

// TestOperationsOnSilentServer checks that each operation of a Locker on
// a pool whose server accepts connections and never answers returns by
// its context's deadline: here the first statement never gets a
// connection, so setup is what must give up.
func TestOperationsOnSilentServer(t *testing.T) {
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
		t.Run(name, func(t *testing.T) {
			defer db.Close()
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
