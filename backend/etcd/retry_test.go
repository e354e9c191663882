package etcdlease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// TestReleaseRetryAfterLostReplyCannotDeleteNextTenure is etcd issue
// 22082's scenario: concurrency.Mutex.Unlock deletes its key
// unconditionally, so an Unlock retried after its reply was lost deletes
// whatever lock another client took in between. Here A's Release is
// applied but its reply is lost, B acquires, and A retries: the retry must
// fail with ErrLost and leave B's tenure alone.
func TestReleaseRetryAfterLostReplyCannotDeleteNextTenure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, wireA := newLocker(t)
	b := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(a.Prefix()))
	name := uniqueName("issue-22082")

	held, err := a.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wireA.dropNext("Txn")
	err = a.Release(ctx, held)
	if err == nil {
		t.Fatal("Release whose reply was lost returned nil")
	}
	if errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("a lost reply was reported as a lease outcome: %v", err)
	}
	if _, err := b.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("after A's Release was applied, Inspect = %v; want ErrNotHeld", err)
	}

	next, err := b.Acquire(ctx, name, "owner-b", time.Minute)
	if err != nil {
		t.Fatalf("B's Acquire after A's release: %v", err)
	}
	if next.Token <= held.Token {
		t.Fatalf("B got token %d, not greater than A's %d", next.Token, held.Token)
	}

	err = a.Release(ctx, held)
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("A's retried Release = %v; want ErrLost", err)
	}
	_, err = a.Renew(ctx, held, time.Minute)
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("A's Renew after B took over = %v; want ErrLost", err)
	}
	got, err := b.Inspect(ctx, name)
	if err != nil {
		t.Fatalf("B's tenure after A's retried Release: %v", err)
	}
	if got.Owner != "owner-b" || got.Token != next.Token {
		t.Fatalf("after A's retried Release, Inspect shows %v; want B's tenure %v", got, next)
	}
	if err := b.Release(ctx, next); err != nil {
		t.Fatalf("B's Release: %v", err)
	}
}

// TestAcquireRetryAfterLostReplyKeepsTheTenure: an Acquire applied whose
// reply was lost is safe to retry: the retry is re-entrant and returns
// the tenure the first attempt started, with its token.
func TestAcquireRetryAfterLostReplyKeepsTheTenure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, w := privateLocker(t) // it counts the cluster's etcd leases
	name := uniqueName("lost-acquire")

	w.dropNext("Txn")
	if _, err := l.Acquire(ctx, name, "owner-a", time.Minute); err == nil || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire whose reply was lost = %v; want a transport error", err)
	}
	first, err := l.Inspect(ctx, name)
	if err != nil {
		t.Fatalf("the lost Acquire was applied, but Inspect = %v", err)
	}
	got, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatalf("retried Acquire: %v", err)
	}
	if got.Token != first.Token {
		t.Fatalf("retried Acquire got token %d; the first attempt's tenure has %d", got.Token, first.Token)
	}
	if err := l.Release(ctx, got); err != nil {
		t.Fatal(err)
	}
	wantLeases(t, l, 0, "Release")
}

// TestRenewAfterLostReplyKeepsTheTenure: a Renew to another ttl, whose
// move onto a new etcd lease was applied but whose reply was lost, leaves
// the tenure held, and a retry succeeds with the same token.
func TestRenewAfterLostReplyKeepsTheTenure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	name := uniqueName("lost-renew")
	held, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w.dropNext("Txn") // the transaction that moves it onto a lease of the new ttl
	if _, err := l.Renew(ctx, held, 2*time.Minute); err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew whose reply was lost = %v; want a transport error", err)
	}
	again, err := l.Renew(ctx, held, 2*time.Minute)
	if err != nil {
		t.Fatalf("retried Renew: %v", err)
	}
	if again.Token != held.Token {
		t.Fatalf("retried Renew changed the token from %d to %d", held.Token, again.Token)
	}
	if got, err := l.Inspect(ctx, name); err != nil || got.Expires.Before(time.Now().Add(time.Minute)) {
		t.Fatalf("after the retried Renew to 2m, Inspect = %v, %v; want it held for more than a minute", got, err)
	}
	if err := l.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseWhoseReplyIsLostIsNotErrLost (issue 9, defect 5): a Release
// that etcd applied but whose reply the network lost returns an error,
// never ErrLost, which would say exclusivity may have been broken. etcd's
// client does not resend a transaction once it may have reached the
// server (see Release), so no resend can find the tenure gone.
//
// The reply is lost exactly: a fault proxy holds back everything etcd
// sends, an observer sees the Release applied, and then the proxy resets
// the connection with the reply still held. (The conformance suite's
// generic lost-reply case loses the first bytes etcd sends after the
// request, which over gRPC is often an HTTP/2 PING sent before etcd has
// applied anything; see TestConformance.)
func TestReleaseWhoseReplyIsLostIsNotErrLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	proxy := faultproxy.StartT(t, testEndpoints[0])
	l := mustNew(t, newClient(t, []string{proxy.Addr()}, nil), WithPrefix(randomPrefix()))
	observer := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(l.Prefix()))
	name := uniqueName("lost-release-reply")
	held, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	proxy.Stall(faultproxy.ToClient)
	released := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		released <- l.Release(rctx, held)
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := observer.Inspect(ctx, name)
		if errors.Is(err, lease.ErrNotHeld) {
			break // etcd applied the Release; its reply is held
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("etcd did not apply the Release within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The reply is lost with the connection; the network is healthy
	// again at once, so that a resent transaction would be answered (and
	// find the tenure gone).
	proxy.Reset()
	if err := proxy.Clear(); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-released:
	case <-time.After(15 * time.Second):
		t.Fatal("Release did not return after its connection was reset")
	}
	t.Logf("Release whose reply was lost: %v", err)
	if err == nil {
		t.Fatal("Release whose reply was lost returned nil")
	}
	for _, s := range []error{lease.ErrLost, lease.ErrHeld, lease.ErrNotHeld} {
		if errors.Is(err, s) {
			t.Fatalf("a lost reply was reported as %q: %v", s, err)
		}
	}
	// The connection comes back for the next call.
	if _, err := l.Acquire(ctx, name, "owner-a", time.Minute); err != nil {
		t.Fatalf("Acquire after the lost reply: %v", err)
	}
}

// TestLateAcquireCannotShortenALaterTenure (found by
// TestClusterFailuresDuringContention, where a member was stopped and
// resumed): an Acquire whose caller gave up before etcd applied it, and
// which etcd applies after the same owner acquired the name again, must
// not touch that later tenure. It once moved the key onto its own etcd
// lease, granted before it was sent, which ended before the later
// tenure's Deadline: another owner could take the name while its holder
// still trusted it.
func TestLateAcquireCannotShortenALaterTenure(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	other := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(l.Prefix()))
	name := uniqueName("late-acquire")
	short := time.Second
	shortTTL := time.Duration(l.s.grantedTTL(short)) * time.Second // what etcd grants for it

	deliver := w.delayNext("Txn")
	sent := time.Now()
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := l.Acquire(actx, name, "owner-a", short)
	cancel()
	if err == nil || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire whose transaction is held back = %v; want its context's error", err)
	}
	// The same owner acquires again, for long enough to outlast the late
	// Acquire's etcd lease by far.
	later, err := l.Acquire(ctx, name, "owner-a", shortTTL+4*time.Second)
	if err != nil {
		t.Fatalf("Acquire after the one held back: %v", err)
	}
	afterLateWrite(t, deliver, other, later, sent.Add(shortTTL))
	if err := l.Release(ctx, later); err != nil {
		t.Fatalf("Release of the later tenure: %v", err)
	}
}

// afterLateWrite delivers a write held back by delayNext, waits until the
// etcd lease it would have put the tenure on has surely ended (ends, and
// etcd revokes expired leases within about half a second), and checks
// that the later tenure is still held, as its Deadline promises, and
// refused to another owner.
func afterLateWrite(t *testing.T, deliver func(context.Context) error, other *Locker, later lease.Lease, lateLeaseEnds time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := deliver(ctx); err != nil {
		t.Fatalf("delivering the late write: %v", err)
	}
	wait := time.Until(lateLeaseEnds.Add(1500 * time.Millisecond))
	if margin := time.Until(later.Deadline) - wait; margin < time.Second {
		t.Fatalf("test setup: only %s between the check and the later tenure's Deadline", margin)
	}
	time.Sleep(wait)
	got, err := other.Inspect(ctx, later.Name)
	if err != nil || got.Owner != later.Owner || got.Token != later.Token {
		t.Fatalf("%s before the later tenure's Deadline, Inspect = %v, %v; want %s's tenure %d", time.Until(later.Deadline).Round(time.Millisecond), got, err, later.Owner, later.Token)
	}
	if _, err := other.Acquire(ctx, later.Name, "owner-b", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("another owner's Acquire before the Deadline = %v; want ErrHeld", err)
	}
}

// TestLateMoveCannotShortenALaterTenure: a Renew to another ttl moves the
// tenure onto an etcd lease of that ttl. A move whose caller gave up
// before etcd applied it, and which etcd applies after a later Renew
// moved the tenure onto another lease, must fail: it would move the
// tenure back onto a lease kept alive only when the late move was sent,
// which ends before the Deadline the later Renew gave the holder.
func TestLateMoveCannotShortenALaterTenure(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	other := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(l.Prefix()))
	name := uniqueName("late-move")
	first := time.Duration(l.s.grantedTTL(time.Second)) * time.Second
	held, err := l.Acquire(ctx, name, "owner-a", first)
	if err != nil {
		t.Fatal(err)
	}
	second := first + time.Second // another etcd lease TTL: a move

	deliver := w.delayNext("Txn")
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = l.Renew(rctx, held, second)
	cancel()
	if err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew whose move is held back = %v; want its context's error", err)
	}
	// The holder renews again, to a ttl that outlasts the late move's
	// etcd lease by far: the tenure moves onto another lease.
	later, err := l.Renew(ctx, held, second+5*time.Second)
	if err != nil {
		t.Fatalf("Renew after the one held back: %v", err)
	}
	afterLateWrite(t, deliver, other, later, sent.Add(second))
	if err := l.Release(ctx, later); err != nil {
		t.Fatalf("Release of the renewed tenure: %v", err)
	}
}

// TestLateReleaseCannotEndAReenteredTenure: a Release whose caller gave up
// before etcd applied it, followed by an Acquire of the same owner, which
// once re-entered the tenure (same token, a fresh Deadline), and then the
// late Release ended it under its holder: another owner took the name
// (TestClusterFailuresDuringContention, a Release sent to a stopped member
// and applied when it resumed). The Acquire must get a new tenure instead.
func TestLateReleaseCannotEndAReenteredTenure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	other := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(l.Prefix()))
	name := uniqueName("late-release")
	first, err := l.Acquire(ctx, name, "owner-a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deliver := w.delayNext("Txn")
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = l.Release(rctx, first)
	cancel()
	if err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release whose transaction is held back = %v; want its context's error", err)
	}
	later, err := l.Acquire(ctx, name, "owner-a", 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire after the Release held back: %v", err)
	}
	if later.Token <= first.Token {
		t.Fatalf("Acquire after a Release in doubt re-entered token %d; want a new tenure", later.Token)
	}
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	err = deliver(dctx)
	dcancel()
	if err != nil {
		t.Fatalf("delivering the late Release: %v", err)
	}
	got, err := other.Inspect(ctx, name)
	if err != nil || got.Owner != "owner-a" || got.Token != later.Token {
		t.Fatalf("after the late Release, Inspect = %v, %v; want owner-a's tenure %d", got, err, later.Token)
	}
	if _, err := other.Acquire(ctx, name, "owner-b", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("another owner's Acquire after the late Release = %v; want ErrHeld", err)
	}
	if err := l.Release(ctx, later); err != nil {
		t.Fatalf("Release of the later tenure: %v", err)
	}
}

// TestLateMoveAfterRenewalsWithTheOldTTL: a Renew to another ttl whose
// move fails without an answer, then Renews with the old ttl, which keep
// the tenure on its old lease. The late move, applied after them, would
// move the tenure onto its own lease, kept alive only when it was sent,
// which ends before the Deadline those Renews gave. The first Renew after
// the failed move must settle it: move the tenure onto a fresh lease,
// which no move sent before can name.
func TestLateMoveAfterRenewalsWithTheOldTTL(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	// Renewals one at a time, and through RenewBatch, as lease.Run's
	// renewer sends them.
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "Renew", true: "RenewBatch"}[batch], func(t *testing.T) {
			t.Parallel()
			lateMoveAfterRenewals(t, batch)
		})
	}
}

func lateMoveAfterRenewals(t *testing.T, batch bool) {
	ctx := context.Background()
	l, w := newLocker(t)
	other := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(l.Prefix()))
	name := uniqueName("late-move-old-ttl")
	short := time.Duration(l.s.grantedTTL(time.Second)) * time.Second
	long := short + 5*time.Second
	renew := func(held lease.Lease) (lease.Lease, error) {
		if !batch {
			return l.Renew(ctx, held, long)
		}
		r := batchtest.RenewBatch(ctx, l, []batchtest.Req{{Lease: held, TTL: long}})
		return r[0].Lease, r[0].Err
	}
	held, err := l.Acquire(ctx, name, "owner-a", long)
	if err != nil {
		t.Fatal(err)
	}
	deliver := w.delayNext("Txn")
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = l.Renew(rctx, held, short)
	cancel()
	if err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew whose move is held back = %v; want its context's error", err)
	}
	later, err := renew(held)
	if err != nil {
		t.Fatalf("Renew with the old ttl after the one held back: %v", err)
	}
	if later, err = renew(later); err != nil {
		t.Fatalf("second Renew with the old ttl: %v", err)
	}
	afterLateWrite(t, deliver, other, later, sent.Add(short))
	if err := l.Release(ctx, later); err != nil {
		t.Fatalf("Release of the renewed tenure: %v", err)
	}
}
