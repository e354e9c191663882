package etcdlease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
	"go.uber.org/goleak"
)

// In the fault tests every call gets a context that ends after
// callBudget, and must be back within lateness after that: a margin for a
// loaded machine, well under cleanupTimeout and the client's 5s dial
// timeout, which a call that outlived its context would show.
const (
	callBudget = 300 * time.Millisecond
	lateness   = 500 * time.Millisecond
)

// timed runs f with a context that ends after callBudget and fails t if f
// returns more than lateness after that.
func timed(t *testing.T, what string, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBudget)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	if took := time.Since(start); took > callBudget+lateness {
		t.Errorf("%s took %s with a %s context; want it back by the context's deadline (+%s)", what, took.Round(time.Millisecond), callBudget, lateness)
	} else {
		t.Logf("%s returned after %s", what, took.Round(time.Millisecond))
	}
	return err
}

// noLeaks checks, when t ends (after every cleanup registered later),
// that no goroutine started during t is left.
func noLeaks(t *testing.T) {
	t.Helper()
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, current) })
}

// openers are the two ways to open an etcd Locker from a URL.
var openers = []struct {
	via  string
	open func(ctx context.Context, rawURL string) (lease.Locker, error)
}{
	{"Open", func(ctx context.Context, rawURL string) (lease.Locker, error) {
		l, err := Open(ctx, rawURL)
		if err != nil {
			return nil, err
		}
		return l, nil
	}},
	{"lease.Open", lease.Open},
}

// unanswering are the clusters that never answer: a server that accepts
// connections and never writes, and a port nobody listens on.
func unanswering(t *testing.T) []struct{ what, addr string } {
	return []struct{ what, addr string }{
		{"a server that accepts and never answers", silentListener(t)},
		{"a closed port", closedPort(t)},
	}
}

// silentListener returns the address of a server that accepts
// connections and never sends a byte: a fault proxy in front of the test
// server, stalled both ways from the start, closed when t ends.
func silentListener(t testing.TB) string {
	t.Helper()
	p := faultproxy.StartT(t, testEndpoints[0])
	p.Stall(faultproxy.Both)
	return p.Addr()
}

// closedPort returns an address that refuses connections: a fault proxy
// that stopped listening, closed when t ends.
func closedPort(t testing.TB) string {
	t.Helper()
	p := faultproxy.StartT(t, testEndpoints[0])
	p.Refuse()
	return p.Addr()
}

// TestOpenFailsByItsDeadline (issue 9, defect 8): Open checks that the
// cluster answers, so an unreachable one, or one that accepts connections
// and never answers, fails Open by its context's deadline with an error
// matching context.DeadlineExceeded, and leaves no goroutine behind. With
// a user and password, the client's authentication is bounded by the
// context too.
//
// It checks deadlines, and goroutines of the whole process: it runs
// alone (not parallel).
func TestOpenFailsByItsDeadline(t *testing.T) {
	testenv.Slow(t)
	noLeaks(t)
	for _, c := range unanswering(t) {
		for _, u := range []string{"etcd://" + c.addr, "etcd://user:secret@" + c.addr} {
			for _, o := range openers {
				what := o.via + " of " + c.what + " (" + u + ")"
				err := timed(t, what, func(ctx context.Context) error {
					l, err := o.open(ctx, u)
					if err == nil {
						_ = l.Close()
						return errors.New("Open succeeded")
					}
					return err
				})
				mustBeFailure(t, what, err, context.DeadlineExceeded)
			}
		}
	}
}

// TestOpenWaitsAtMostTheDialTimeout: with a context without deadline, Open
// gives up on a cluster that never answers after the URL's dial_timeout,
// and says so.
//
// It checks a deadline: it runs alone (not parallel).
func TestOpenWaitsAtMostTheDialTimeout(t *testing.T) {
	noLeaks(t)
	u := "etcd://" + silentListener(t) + "?dial_timeout=" + callBudget.String()
	start := time.Now()
	l, err := Open(context.Background(), u)
	took := time.Since(start)
	if err == nil {
		_ = l.Close()
		t.Fatal("Open of a cluster that never answers succeeded")
	}
	mustBeFailure(t, "Open with dial_timeout", err, context.DeadlineExceeded)
	if !strings.Contains(err.Error(), "dial_timeout "+callBudget.String()) || took > callBudget+lateness {
		t.Fatalf("Open with dial_timeout %s returned after %s: %v; want it back in time, naming dial_timeout", callBudget, took, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, "etcd://"+testEndpoints[0]); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a canceled context = %v; want context.Canceled", err)
	}
}

// TestEveryCallReturnsByItsDeadline (issue 9's rule): on a cluster that
// never answers, every call returns by its context's deadline with an
// error matching context.DeadlineExceeded, never a lease outcome.
//
// It checks deadlines: it runs alone (not parallel).
func TestEveryCallReturnsByItsDeadline(t *testing.T) {
	testenv.Slow(t)
	for _, c := range unanswering(t) {
		l := mustNew(t, newClient(t, []string{c.addr}, nil), WithPrefix(randomPrefix()))
		for _, call := range calls {
			what := call.op + " on " + c.what
			err := timed(t, what, func(ctx context.Context) error { return call.call(ctx, l) })
			mustBeFailure(t, what, err, context.DeadlineExceeded)
		}
	}
}

// TestCleanupNeverHoldsTheCall: an operation returns once etcd has told
// it the outcome. Revoking the etcd lease it leaves behind (and, for a
// refused Acquire or a ForceRelease, reading a remaining time) must not
// keep it past its context when etcd stops answering those requests; the
// revocations finish later, and no etcd lease is left.
//
// It checks deadlines: it runs alone (not parallel).
func TestCleanupNeverHoldsTheCall(t *testing.T) {
	bg := context.Background()
	l, w := privateLocker(t)
	a, err := l.Acquire(bg, "a", "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(bg, "busy", "owner-b", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"forced-1", "forced-2"} {
		if _, err := l.Acquire(bg, n, "owner-b", time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	w.stall("LeaseRevoke")
	err = timed(t, "re-entrant Acquire", func(ctx context.Context) (err error) {
		a, err = l.Acquire(ctx, "a", "owner-a", 2*time.Minute)
		return err
	})
	if err != nil {
		t.Fatalf("re-entrant Acquire: %v", err)
	}
	err = timed(t, "Acquire of a held name", func(ctx context.Context) error {
		_, err := l.Acquire(ctx, "busy", "owner-a", time.Minute)
		return err
	})
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire of a held name = %v; want ErrHeld", err)
	}
	err = timed(t, "Renew to another ttl", func(ctx context.Context) (err error) {
		a, err = l.Renew(ctx, a, time.Minute)
		return err
	})
	if err != nil {
		t.Fatalf("Renew to another ttl: %v", err)
	}
	if err := timed(t, "Release", func(ctx context.Context) error { return l.Release(ctx, a) }); err != nil {
		t.Fatalf("Release: %v", err)
	}
	err = timed(t, "ForceRelease", func(ctx context.Context) error {
		_, err := l.ForceRelease(ctx, "forced-1")
		return err
	})
	if err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}

	w.stall("LeaseTimeToLive")
	err = timed(t, "Acquire of a held name, its remaining time unanswered", func(ctx context.Context) error {
		_, err := l.Acquire(ctx, "busy", "owner-a", time.Minute)
		return err
	})
	mustBeFailure(t, "Acquire of a held name, its remaining time unanswered", err, context.DeadlineExceeded)
	err = timed(t, "ForceRelease, its remaining time unanswered", func(ctx context.Context) error {
		_, err := l.ForceRelease(ctx, "forced-2")
		return err
	})
	if err != nil {
		t.Fatalf("ForceRelease whose key was deleted: %v", err)
	}

	w.unstall()
	wantLeases(t, l, 1, "etcd answers again (the tenure of \"busy\" remains)")
}
