package conformance

import (
	"errors"
	"testing"

	"github.com/leasekit/lease"
)

// The optional queue of waiters (lease.FairAcquirer), where a store keeps
// one.

// fairer returns l as a FairAcquirer, or skips t when it cannot queue.
func (s *suite) fairer(t testing.TB, l lease.Locker) lease.FairAcquirer {
	t.Helper()
	fa, ok := l.(lease.FairAcquirer)
	if !ok {
		t.Skip("the Locker does not implement lease.FairAcquirer")
	}
	if err := fa.Dequeue(t.Context(), s.name("fair-probe"), "probe"); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("the store keeps no queue: ", err)
	}
	return fa
}

// queued calls AcquireQueued and fails t unless it reports the name held
// by want (the holder, or the waiter ahead).
func (s *suite) queued(t testing.TB, fa lease.FairAcquirer, name, owner, want string) {
	t.Helper()
	_, err := fa.AcquireQueued(t.Context(), name, owner, long, long)
	var he *lease.HeldError
	if !errors.As(err, &he) {
		if err == nil {
			t.Fatalf("AcquireQueued by %s was granted; want it to wait behind %s", owner, want)
		}
		failCall(t, "AcquireQueued by "+owner, err)
	}
	if he.Owner != want {
		t.Fatalf("AcquireQueued by %s was told to wait for %q, want %q", owner, he.Owner, want)
	}
}

// fairQueueOrder: waiters that queue for a name get it in arrival order,
// each with a larger token, whoever asks first once it is free.
func fairQueueOrder(t testing.TB, s *suite) {
	l := s.locker(t)
	fa := s.fairer(t, l)
	ctx := t.Context()
	name := s.name("fair-order")
	held, _ := s.acquire(t, l, name, "holder", long)
	for _, w := range []string{"first", "second", "third"} {
		s.queued(t, fa, name, w, "holder")
	}
	if err := l.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	last := held.Token
	for i, w := range []string{"first", "second", "third"} {
		// The later waiters ask before their turn and are told to wait.
		for _, later := range []string{"third", "second"}[:2-i] {
			s.queued(t, fa, name, later, w)
		}
		got, err := fa.AcquireQueued(ctx, name, w, long, long)
		if err != nil {
			failCall(t, "AcquireQueued by "+w+" at its turn", err)
		}
		if got.Owner != w || got.Token <= last {
			t.Fatalf("AcquireQueued by %s at its turn returned %v; want a tenure of %s with a token above %d", w, got, w, last)
		}
		last = got.Token
		s.mustHold(t, l, got, "after the queued Acquire")
		if err := l.Release(ctx, got); err != nil {
			failCall(t, "Release", err)
		}
	}
}

// fairPlaceExpires: a waiter that gives up (Dequeue) or stops renewing its
// place (it expires) no longer holds up the waiters behind it.
func fairPlaceExpires(t testing.TB, s *suite) {
	l := s.locker(t)
	fa := s.fairer(t, l)
	ctx := t.Context()
	name := s.name("fair-expire")
	held, _ := s.acquire(t, l, name, "holder", long)
	if _, err := fa.AcquireQueued(ctx, name, "gives-up", long, long); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("AcquireQueued of a held name = %v, want ErrHeld", err)
	}
	_, err := fa.AcquireQueued(ctx, name, "dies", long, s.h.TTL)
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("AcquireQueued of a held name = %v, want ErrHeld", err)
	}
	placed := s.now()
	s.queued(t, fa, name, "patient", "holder")
	if err := fa.Dequeue(ctx, name, "gives-up"); err != nil {
		failCall(t, "Dequeue", err)
	}
	if err := fa.Dequeue(ctx, name, "never-queued"); err != nil {
		t.Fatalf("Dequeue of an owner without a place = %v, want nil", err)
	}
	if err := l.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	s.queued(t, fa, name, "patient", "dies")
	s.waitPast(placed, s.h.TTL)
	got, err := fa.AcquireQueued(ctx, name, "patient", long, long)
	if err != nil {
		failCall(t, "AcquireQueued after the waiter ahead gave up and the next one's place expired", err)
	}
	s.mustHold(t, l, got, "after the queued Acquire")
}

// fairHolderAndBarger: the holder's own AcquireQueued re-enters its tenure
// (same token) and leaves it no place in line, and a plain Acquire of a
// free name does not wait for the line: fairness binds only the waiters
// that queue.
func fairHolderAndBarger(t testing.TB, s *suite) {
	l := s.locker(t)
	fa := s.fairer(t, l)
	ctx := t.Context()
	name := s.name("fair-holder")
	held, _ := s.acquire(t, l, name, "holder", long)
	again, err := fa.AcquireQueued(ctx, name, "holder", long, long)
	if err != nil {
		failCall(t, "AcquireQueued by the holder", err)
	}
	if again.Owner != "holder" || again.Token != held.Token {
		t.Fatalf("AcquireQueued by the holder returned %v; want its own tenure, token %d", again, held.Token)
	}
	if err := l.Release(ctx, again); err != nil {
		failCall(t, "Release", err)
	}
	// Had the holder kept a place, the next waiter would be told to wait
	// for it.
	next, err := fa.AcquireQueued(ctx, name, "next", long, long)
	if err != nil {
		failCall(t, "AcquireQueued of a free name after the holder's release (the holder must have left no place)", err)
	}
	if next.Owner != "next" || next.Token <= held.Token {
		t.Fatalf("AcquireQueued by next returned %v; want a tenure of next with a token above %d", next, held.Token)
	}
	s.queued(t, fa, name, "waiter", "next")
	if err := l.Release(ctx, next); err != nil {
		failCall(t, "Release", err)
	}
	barger, _ := s.acquire(t, l, name, "barger", long)
	if barger.Token <= next.Token {
		t.Fatalf("the plain Acquire ahead of the line got token %d; want above %d", barger.Token, next.Token)
	}
	if err := fa.Dequeue(ctx, name, "waiter"); err != nil {
		failCall(t, "Dequeue", err)
	}
}
