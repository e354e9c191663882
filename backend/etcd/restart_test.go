package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// These tests kill etcd members with SIGKILL, on private servers they
// start (internal/testserver), never on the shared one. What they pin
// down is etcd's lease semantics as the Locker exposes them:
//
//   - A tenure survives a restart of the cluster (or a change of leader):
//     etcd keeps its leases on disk, and the member that becomes leader
//     restarts every lease's TTL (lessor.Promote). So a tenure nobody
//     renews ends about its TTL after the new leader took over, later
//     than it would have: never earlier, so no one takes a name before the
//     holder's Deadline.
//   - While the cluster is down, every call fails as a store failure by
//     its context's deadline, never as held, lost or not held; a holder
//     that renews through the outage keeps its tenure and its token.
//   - Tokens keep growing across a restart (revisions are on disk), and go
//     back only when the data is wiped, as the package documentation says.

// restartTTL is the ttl of the tenure lease.Run renews through a restart:
// long enough that the Run's Deadline outlasts a slow restart on a loaded
// machine (it renews every ttl/3, so its Deadline is at least 2/3 of it
// after the kill).
const restartTTL = 30 * time.Second

// runHeld starts lease.Run of name on l and returns the lease fn holds
// (as of its latest renewal, when called), a channel that makes fn
// return, and Run's result.
func runHeld(t *testing.T, l lease.Locker, name string, ttl time.Duration) (func() lease.Lease, chan<- struct{}, <-chan error) {
	t.Helper()
	entered := make(chan context.Context, 1)
	stop := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- lease.Run(context.Background(), l, name, ttl, func(ctx context.Context) error {
			entered <- ctx
			select {
			case <-stop:
				return nil
			case <-ctx.Done():
				return fmt.Errorf("fn's context ended: %w", context.Cause(ctx))
			}
		})
	}()
	select {
	case ctx := <-entered:
		return func() lease.Lease { held, _ := lease.FromContext(ctx); return held }, stop, ran
	case err := <-ran:
		t.Fatalf("Run of %q: %v", name, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("Run of %q did not enter fn within 20s", name)
	}
	return nil, nil, nil
}

// renewAllAfter renews held (tenures of l, acquired for time.Minute) in
// one batch, with a generous context, and fails t unless every one is
// renewed with its token: the keep-alive streams the outage broke are
// opened again, whichever member they were on.
func renewAllAfter(t *testing.T, l *Locker, held []lease.Lease, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, r := range batchtest.RenewBatch(ctx, l, requests(held, time.Minute)) {
		if r.Err != nil || r.Lease.Token != held[i].Token {
			t.Fatalf("renewal of tenure %d of %d after %s: %v, %v; want it renewed with token %d", i+1, len(held), what, r.Lease, r.Err, held[i].Token)
		}
	}
}

// waitRenewed waits until current, the lease a Run holds, has been renewed
// by a request sent after since: its Deadline is past since plus most of
// the ttl. It fails t after limit.
func waitRenewed(t *testing.T, current func() lease.Lease, ttl time.Duration, since time.Time, limit time.Duration) lease.Lease {
	t.Helper()
	for deadline := time.Now().Add(limit); ; {
		held := current()
		if held.Deadline.After(since.Add(ttl - lease.DriftMargin(ttl))) {
			return held
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Run's lease was not renewed within %s after etcd came back: its Deadline is %s after that", limit, held.Deadline.Sub(since).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failWhileDown checks that every call on a cluster that is down fails
// as a store failure, by its context's deadline. held is a tenure of l
// acquired for ttl.
func failWhileDown(t *testing.T, l *Locker, held lease.Lease, ttl time.Duration) {
	t.Helper()
	calls := []struct {
		op   string
		call func(ctx context.Context) error
	}{
		{"Acquire of a free name", func(ctx context.Context) error {
			_, err := l.Acquire(ctx, uniqueName("down"), "owner-x", time.Minute)
			return err
		}},
		{"Acquire of a held name", func(ctx context.Context) error {
			_, err := l.Acquire(ctx, held.Name, "owner-x", time.Minute)
			return err
		}},
		{"Renew", func(ctx context.Context) error { _, err := l.Renew(ctx, held, ttl); return err }},
		{"Renew to another ttl", func(ctx context.Context) error { _, err := l.Renew(ctx, held, ttl+time.Minute); return err }},
		{"RenewBatch", func(ctx context.Context) error {
			return batchtest.RenewBatch(ctx, l, []batchtest.Req{{Lease: held, TTL: ttl}})[0].Err
		}},
		{"Release", func(ctx context.Context) error { return l.Release(ctx, held) }},
		{"Inspect", func(ctx context.Context) error { _, err := l.Inspect(ctx, held.Name); return err }},
	}
	for _, c := range calls {
		what := c.op + " while etcd is down"
		mustBeFailure(t, what, timed(t, what, c.call), context.DeadlineExceeded)
	}
}

// waitFree polls until name is free on l, and returns when it saw it
// free; it fails t if that takes past limit.
func waitFree(t *testing.T, l *Locker, name string, limit time.Time) time.Time {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := l.Inspect(ctx, name)
		cancel()
		now := time.Now()
		if errors.Is(err, lease.ErrNotHeld) {
			return now
		}
		if err != nil {
			t.Fatalf("Inspect(%q): %v", name, err)
		}
		if now.After(limit) {
			t.Fatalf("%q is still held after %s", name, now.Sub(limit))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartKeepsTenures kills the only member of a cluster while
// tenures are held, and starts it again on the same data directory.
//
// Its outage and expiry are timed, and its calls checked against their
// deadlines: it runs alone (not parallel).
func TestRestartKeepsTenures(t *testing.T) {
	testenv.Slow(t)
	e := testserver.StartEtcd(t, nil)
	holdThrough(t, e.Endpoints(), "the restart", func(l *Locker, idle lease.Lease, ttl time.Duration) {
		e.Member(0).Kill()
		failWhileDown(t, l, idle, ttl)
		e.Member(0).Start()
	})
}

// TestLeaderKillKeepsTenures kills the leader of a three-member cluster
// while tenures are held: the others elect a new leader, which restarts
// every lease's TTL; a holder renews through the election. (The killed
// member stays down: the test's cleanup stops the others.)
//
// Its election and expiry are timed: it runs alone (not parallel).
func TestLeaderKillKeepsTenures(t *testing.T) {
	testenv.Slow(t)
	e := testserver.StartEtcd(t, &testserver.EtcdOptions{Members: 3})
	holdThrough(t, e.Endpoints(), "the election", func(*Locker, lease.Lease, time.Duration) {
		old := e.KillLeader()
		t.Logf("member %d was elected after leader %d was killed", e.Leader(), old)
	})
}

// holdThrough holds tenures on the cluster at endpoints through outage,
// which kills what it must and returns once the cluster serves again:
// one renewed by lease.Run, one (idle, of the shortest ttl the test can
// watch end) that nobody renews, and tenures on every keep-alive stream.
// Then it checks what the package documentation says under "Restarts".
func holdThrough(t *testing.T, endpoints []string, what string, outage func(l *Locker, idle lease.Lease, ttl time.Duration)) {
	ctx := context.Background()
	l := mustNew(t, newClient(t, endpoints, nil), WithPrefix(randomPrefix()))
	observer := mustNew(t, newClient(t, endpoints, nil), WithPrefix(l.Prefix()))
	ttl := max(shortestTTL(t, endpoints), 4*time.Second)

	current, stopRun, ran := runHeld(t, l, "run", restartTTL)
	running := current()
	idle, err := l.Acquire(ctx, "idle", "owner-idle", ttl)
	if err != nil {
		t.Fatal(err)
	}
	// Tenures on every keep-alive stream, all open, as in a Locker that
	// has been renewing for a while.
	many := acquireMany(t, l, "many", "owner-many", 4*kaStreams, time.Minute)
	if err := l.openStreams(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 3)
	killed := time.Now()
	outage(l, idle, ttl)
	back := time.Now()
	t.Logf("%s took %s", what, back.Sub(killed).Round(time.Millisecond))
	renewAllAfter(t, l, many, what)

	// The tenure nobody renews outlives its ttl: its lease restarted when
	// a member became leader, after the kill.
	freed := waitFree(t, observer, idle.Name, back.Add(ttl+expiryLag+2*time.Second))
	t.Logf("the unrenewed tenure of %s ended %s after the kill, %s after %s (it would have ended %s after the kill)",
		ttl, freed.Sub(killed).Round(time.Millisecond), freed.Sub(back).Round(time.Millisecond), what, idle.Expires.Sub(killed).Round(time.Millisecond))
	if freed.Before(killed.Add(ttl)) {
		t.Fatalf("the unrenewed tenure ended %s after the kill, before a whole ttl (%s): etcd did not restart its lease", freed.Sub(killed), ttl)
	}
	next, err := observer.Acquire(ctx, idle.Name, "owner-next", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if next.Token <= max(idle.Token, running.Token) {
		t.Fatalf("the first tenure after %s got token %d, not greater than %d and %d from before it", what, next.Token, idle.Token, running.Token)
	}

	// The Run renews after the outage: same tenure, fn never stopped.
	if renewed := waitRenewed(t, current, restartTTL, back, restartTTL/3+10*time.Second); renewed.Token != running.Token {
		t.Fatalf("the Run's lease changed token from %d to %d across %s", running.Token, renewed.Token, what)
	}
	got, err := observer.Inspect(ctx, running.Name)
	if err != nil || got.Token != running.Token || got.Owner != running.Owner {
		t.Fatalf("the tenure Run renews through %s: Inspect = %v, %v; want %v", what, got, err, running)
	}
	close(stopRun)
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run that renewed through %s returned %v", what, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after fn did")
	}
}

// TestWipedDataTokensGoBack pins down what the package documentation says
// under "Restores and wiped data": a cluster whose data directory is wiped
// starts its revisions, and so tokens, again from the start. The holders
// of the lost tenures learn they lost them (ErrLost), not a store error,
// and the Locker's spare etcd leases, gone with the data, are replaced.
func TestWipedDataTokensGoBack(t *testing.T) {
	t.Parallel()
	e := testserver.StartEtcd(t, nil)
	ctx := context.Background()
	l := mustNew(t, newClient(t, e.Endpoints(), nil), WithPrefix(randomPrefix()))
	var last lease.Lease
	for range 50 { // revisions to lose, and spare leases in the pool
		held, err := l.Acquire(ctx, "n", "owner-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
	}
	last, err := l.Acquire(ctx, "n", "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	l.settle()
	if l.spares() == 0 {
		t.Fatal("no spare etcd lease in the pool before the wipe: the test would not test replacing them")
	}

	m := e.Member(0)
	m.Kill()
	// The data is in member/; the directory itself is the server's
	// working directory.
	if err := os.RemoveAll(filepath.Join(m.Dir(), "member")); err != nil {
		t.Fatal(err)
	}
	m.Start()

	_, err = l.Renew(ctx, last, time.Minute)
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew of a tenure whose data was wiped = %v; want ErrLost", err)
	}
	next, err := l.Acquire(ctx, "n", "owner-b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the wipe, with spare leases the cluster no longer has: %v", err)
	}
	t.Logf("the last token before the wipe was %d, the first after it %d", last.Token, next.Token)
	if next.Token >= last.Token {
		t.Fatalf("after the wipe the token is %d, not below %d: the documented behaviour changed", next.Token, last.Token)
	}
}
