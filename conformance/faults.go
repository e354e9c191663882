package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/faultproxy"
)

// Contract line 9 on a bad day: the store reached through a TCP proxy that
// the suite controls (Harness.Addr and Harness.NewAt), which stalls,
// delays, loses replies and resets connections.

// faultCall is how long each call under a fault may take, and faultSlack
// what the suite allows beyond it (a loaded machine's scheduling).
const (
	faultCall  = 300 * time.Millisecond
	faultSlack = 500 * time.Millisecond
)

// proxied returns a fault proxy in front of the store and a Locker that
// reaches the store through it, or skips t when the Harness cannot say
// where the store is.
func (s *suite) proxied(t testing.TB) (*faultproxy.Proxy, lease.Locker) {
	t.Helper()
	if s.h.Addr == "" || s.h.NewAt == nil {
		t.Skip("the Harness has no Addr and NewAt: the store cannot be reached through a fault proxy")
	}
	p, err := faultproxy.Start(t.Context(), s.h.Addr)
	if err != nil {
		t.Fatalf("starting a fault proxy in front of %s: %v", s.h.Addr, err)
	}
	t.Cleanup(p.Close)
	l := s.h.NewAt(t, p.Addr())
	if l == nil {
		t.Fatal("Harness.NewAt returned nil")
	}
	t.Cleanup(func() { _ = l.Close() })
	return p, l
}

// mustFailAsStore fails t unless err is a failure of the store: not nil
// and matching none of the lease outcomes.
func mustFailAsStore(t testing.TB, op string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded through a store that does not answer", op)
	}
	for _, sentinel := range []error{lease.ErrHeld, lease.ErrLost, lease.ErrNotHeld, lease.ErrInvalid} {
		if errors.Is(err, sentinel) {
			t.Fatalf("%s: the store's failure came back disguised as %v: %v", op, sentinel, err)
		}
	}
}

// faultStallEndsByDeadline: every call on a store that stops answering
// returns by its context's deadline, as a store failure.
func faultStallEndsByDeadline(t testing.TB, s *suite) {
	p, l := s.proxied(t)
	name := s.name("fault-stall")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	p.Stall(faultproxy.Both)
	calls := []struct {
		op   string
		call func(ctx context.Context) error
	}{
		{"Acquire of a free name", func(ctx context.Context) error {
			_, err := l.Acquire(ctx, s.name("fault-stall-free"), "owner-a", long)
			return err
		}},
		{"Acquire of a held name", func(ctx context.Context) error { _, err := l.Acquire(ctx, name, "owner-b", long); return err }},
		{"Renew", func(ctx context.Context) error { _, err := l.Renew(ctx, held, long); return err }},
		{"Release", func(ctx context.Context) error { return l.Release(ctx, held) }},
		{"Inspect", func(ctx context.Context) error { _, err := l.Inspect(ctx, name); return err }},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(t.Context(), faultCall)
		start := time.Now()
		err := c.call(ctx)
		took := time.Since(start)
		cancel()
		mustFailAsStore(t, c.op+" on a stalled store", err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on a stalled store returned %v; want an error matching context.DeadlineExceeded", c.op, err)
		}
		if took > faultCall+faultSlack {
			t.Fatalf("%s on a stalled store took %s with a context of %s: calls must return by their context's deadline", c.op, took.Round(time.Millisecond), faultCall)
		}
	}
}

// faultLostReleaseReply: a Release whose reply is lost is never reported
// as lost: it succeeds (the client resent it and recognised its own
// release) or fails as a store error, and the store agrees.
func faultLostReleaseReply(t testing.TB, s *suite) {
	p, l := s.proxied(t)
	direct := s.locker(t)
	name := s.name("fault-lost-release")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	p.LoseReplies(1, faultproxy.ThenReset)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	err := l.Release(ctx, held)
	cancel()
	p.Clear()
	if errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release whose reply was lost returned %v: the caller would believe exclusivity was broken", err)
	}
	if err == nil {
		if _, stillHeld := s.inspect(t, direct, name); stillHeld {
			t.Fatalf("Release returned nil but %q is still held", name)
		}
	}
	// Whatever happened, the tenure is now released (a second Release
	// reports ErrLost) or intact (a second Release succeeds). Which one
	// an Inspect made now shows does not settle it: a request whose reply
	// was lost may still wait in the store and be applied a moment later
	// (etcd under load did, between the Inspect and the second Release).
	second := direct.Release(t.Context(), held)
	switch {
	case second == nil:
		if err == nil {
			t.Fatalf("Release returned nil, and a second Release of the same tenure succeeded too")
		}
	case errors.Is(second, lease.ErrLost):
	default:
		failCall(t, "a second Release after the one whose reply was lost", second)
	}
	// Either way the name is free now.
	if got, stillHeld := s.inspect(t, direct, name); stillHeld {
		t.Fatalf("after the second Release (%v), %q is still held: %v", second, name, got)
	}
}

// faultLostAcquireReply: an Acquire whose reply is lost can be retried by
// the same owner, who then holds the name.
func faultLostAcquireReply(t testing.TB, s *suite) {
	p, l := s.proxied(t)
	direct := s.locker(t)
	name := s.name("fault-lost-acquire")
	s.inspect(t, l, name) // a live connection, so the next request is the Acquire
	p.LoseReplies(1, faultproxy.ThenReset)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	first, err := l.Acquire(ctx, name, "owner-a", long)
	cancel()
	p.Clear()
	if err != nil {
		mustFailAsStore(t, "Acquire whose reply was lost", err)
	}
	again, _ := s.acquire(t, l, name, "owner-a", long)
	if err == nil && again.Token != first.Token {
		t.Fatalf("retrying an Acquire changed the token from %d to %d", first.Token, again.Token)
	}
	s.mustHold(t, direct, again, "after the retried Acquire")
	_, err = direct.Acquire(t.Context(), name, "owner-b", long)
	s.mustBeHeld(t, "Acquire by another owner after the retried Acquire", err, name, "owner-a", long)
}

// faultResetIsStoreError: a connection reset in the middle of a call is a
// store failure, never a lease outcome, and the call can be retried.
func faultResetIsStoreError(t testing.TB, s *suite) {
	p, l := s.proxied(t)
	name := s.name("fault-reset")
	s.inspect(t, l, name)
	p.Stall(faultproxy.ToClient)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := l.Acquire(ctx, name, "owner-a", long)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	p.Refuse()
	p.Reset()
	var err error
	select {
	case err = <-done:
	case <-time.After(5*time.Second + faultSlack):
		t.Fatal("Acquire did not return after its connection was reset and its context ended")
	}
	if err := p.Clear(); err != nil {
		t.Fatalf("restarting the proxy: %v", err)
	}
	mustFailAsStore(t, "Acquire whose connection was reset", err)
	s.acquire(t, l, name, "owner-a", long)
}

// faultStalledHolderStopsFirst: a holder whose store stops answering
// stops (Run cancels its work's context) before the store lets anyone
// else take the name.
func faultStalledHolderStopsFirst(t testing.TB, s *suite) {
	if s.h.Advance != nil {
		t.Skip("with a simulated store clock, the store's expiry is not tied to the holder's real-time Deadline")
	}
	p, l := s.proxied(t)
	direct := s.locker(t)
	name := s.name("fault-stalled-holder")
	ttl := max(s.h.TTL, 500*time.Millisecond)
	entered := make(chan context.Context, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- lease.Run(context.WithoutCancel(t.Context()), l, name, ttl, func(ctx context.Context) error {
			entered <- ctx
			<-ctx.Done()
			return nil
		})
	}()
	var work context.Context // the holder's work's context
	select {
	case work = <-entered:
	case err := <-ran:
		failCall(t, "Run", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not enter fn within 10s")
	}
	p.Stall(faultproxy.Both)
	limit := time.Now().Add(4*ttl + s.h.Granularity + s.h.ExpiryLag + 5*time.Second)
	for {
		_, err := direct.Acquire(t.Context(), name, "owner-b", long)
		if err == nil {
			// The work must have been told to stop (its context ended)
			// before another owner got the name. When fn itself sees
			// that is up to the scheduler, and not checked here.
			if work.Err() == nil {
				t.Fatalf("another owner took %q while the stalled holder's work's context was still live: both acted as holders", name)
			}
			break
		}
		if !errors.Is(err, lease.ErrHeld) {
			failCall(t, "Acquire by another owner", err)
		}
		if time.Now().After(limit) {
			t.Fatalf("%q was never freed after its holder's store stalled", name)
		}
		time.Sleep(time.Millisecond)
	}
	p.Clear()
	select {
	case err := <-ran:
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Run whose store stalled returned %v, want an error matching ErrLost", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its store answered again")
	}
}

// faultSlowStoreNeverEntersFn: Run on a store whose answers take longer
// than the ttl never enters fn, and says the store was too slow.
func faultSlowStoreNeverEntersFn(t testing.TB, s *suite) {
	p, l := s.proxied(t)
	name := s.name("fault-slow")
	s.inspect(t, l, name)
	ttl := max(s.h.TTL, 200*time.Millisecond)
	p.Delay(faultproxy.Both, ttl)
	defer p.Clear()
	err := lease.Run(t.Context(), l, name, ttl, func(context.Context) error {
		t.Error("Run entered fn on a store whose answer came after the lease's Deadline")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Run on a store slower than the ttl returned %v; want an error matching context.DeadlineExceeded", err)
	}
}
