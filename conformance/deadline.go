package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/line"
)

// Contract line 7: expiry by the store's clock, and a Deadline that makes
// the holder stop before the store can give the name away.

// deadlineIsConservative: the Deadline is read before the request and ends
// a drift margin early, on every call that grants or extends a tenure:
// Acquire and Renew, and the waiting Acquires (woken and fair) where the
// Locker keeps a line of waiters.
func deadlineIsConservative(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("deadline")
	check := func(op string, got lease.Lease, ttl time.Duration, start, done time.Time) {
		t.Helper()
		if latest := done.Add(ttl - lease.DriftMargin(ttl)); got.Deadline.After(latest) {
			t.Fatalf("%s returned a Deadline %s later than the request's start + ttl - DriftMargin(ttl): the clock was read after the request was sent, or the margin was left out", op, got.Deadline.Sub(latest))
		}
		if earliest := start.Add(ttl / 2); got.Deadline.Before(earliest) {
			t.Fatalf("%s returned a Deadline only %s after the request, for a ttl of %s", op, got.Deadline.Sub(start), ttl)
		}
		if !strings.Contains(got.Deadline.String(), " m=") {
			t.Fatalf("%s returned a Deadline without a monotonic clock reading: a wall-clock step would move it", op)
		}
		if !got.Valid() {
			t.Fatalf("%s returned a Lease that is not Valid right away (Deadline in %s)", op, time.Until(got.Deadline))
		}
	}
	ctx := t.Context()
	for _, ttl := range []time.Duration{long, 2 * s.h.TTL} {
		start := time.Now()
		got, err := l.Acquire(ctx, name, "owner-a", ttl)
		done := time.Now()
		if err != nil {
			failCall(t, "Acquire", err)
		}
		check("Acquire for "+ttl.String(), got, ttl, start, done)
		start = time.Now()
		got, err = l.Renew(ctx, got, ttl)
		done = time.Now()
		if err != nil {
			failCall(t, "Renew", err)
		}
		check("Renew for "+ttl.String(), got, ttl, start, done)
	}
	type acquirer struct {
		op      string
		acquire func(name string, ttl time.Duration) (lease.Lease, error)
	}
	var waiting []acquirer
	for _, fair := range []bool{false, true} {
		op := "a waiting Acquire"
		if fair {
			op = "a fair waiting Acquire"
		}
		waiting = append(waiting, acquirer{op, func(name string, ttl time.Duration) (lease.Lease, error) {
			w := line.New(fair, lineRetry)
			defer w.Done(true)
			return l.Acquire(line.NewContext(ctx, w), name, "owner-a", ttl)
		}})
	}
	for _, a := range waiting {
		for _, ttl := range []time.Duration{long, 2 * s.h.TTL} {
			start := time.Now()
			got, err := a.acquire(s.name("deadline-"+a.op), ttl)
			done := time.Now()
			if errors.Is(err, errors.ErrUnsupported) {
				break // the store cannot wait this way
			}
			if err != nil {
				failCall(t, a.op, err)
			}
			check(a.op+" for "+ttl.String(), got, ttl, start, done)
		}
	}
}

// noTakeoverBeforeDeadline: no other owner acquires a name before the
// previous holder's Deadline. Another owner polls the name as fast as the
// store answers; the call that wins must return after the holder's
// Deadline, or the two would act as holders at once.
func noTakeoverBeforeDeadline(t testing.TB, s *suite) {
	if s.h.Advance != nil {
		t.Skip("with a simulated store clock, the store's expiry is not tied to the holder's real-time Deadline")
	}
	holder, poller := s.locker(t), s.locker(t)
	ctx := t.Context()
	const rounds = 3
	for r := range rounds {
		name := s.name("no-early-takeover")
		held, _ := s.acquire(t, holder, name, "owner-a", s.h.TTL)
		limit := time.Now().Add(4*s.h.TTL + s.h.Granularity + s.h.ExpiryLag + 2*time.Second)
		for polls := 1; ; polls++ {
			got, err := poller.Acquire(ctx, name, "owner-b", long)
			returned := time.Now()
			if err == nil {
				if returned.Before(held.Deadline) {
					t.Fatalf("round %d: owner-b acquired %q %s before owner-a's Deadline (poll %d): both would act as holders; the Deadline must come from a clock reading taken before the request, minus the drift margin, and the store must judge expiry by its own clock, not by each client's (two Lockers whose clocks are skewed see different expiries)",
						r, name, held.Deadline.Sub(returned), polls)
				}
				if got.Token <= held.Token {
					t.Fatalf("round %d: the takeover got token %d, not greater than %d", r, got.Token, held.Token)
				}
				break
			}
			if !errors.Is(err, lease.ErrHeld) {
				failCall(t, "Acquire by the polling owner", err)
			}
			if returned.After(limit) {
				t.Fatalf("round %d: %q was still held %s after a %s tenure began (Harness.ExpiryLag %s)", r, name, returned.Sub(held.Deadline), s.h.TTL, s.h.ExpiryLag)
			}
			// Poll tightly, but leave the store a moment between calls.
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// faultSlowRepliesDeadline: with every reply delayed on its way back (a
// TCP proxy in front of the store), the Deadline of a granted or renewed
// tenure still counts from before the request: a Locker that reads its
// clock when the reply arrives gives a Deadline the delay too late, which
// the plain Deadline case, bounded by the moment the call returned, cannot
// see on a fast store.
func faultSlowRepliesDeadline(t testing.TB, s *suite) {
	p, l := s.proxied(t)
	ctx := t.Context()
	name := s.name("fault-slow-deadline")
	s.inspect(t, l, name) // the connection is open before the delay
	const slow = 300 * time.Millisecond
	p.Delay(faultproxy.ToClient, slow)
	check := func(op string, call func() (lease.Lease, error)) lease.Lease {
		t.Helper()
		start := time.Now()
		got, err := call()
		took := time.Since(start)
		if err != nil {
			failCall(t, op+" with its reply delayed", err)
		}
		if took < slow {
			couldNotTest(t, "%s returned %s after it began although every reply was delayed %s: the proxy's delay did not reach this call", op, took.Round(time.Millisecond), slow)
		}
		if latest := start.Add(long - lease.DriftMargin(long) + slow/2); got.Deadline.After(latest) {
			t.Fatalf("%s, its reply delayed %s, returned a Deadline %s after the request's start + ttl - DriftMargin(ttl): the clock was read after the reply, not before the request",
				op, slow, got.Deadline.Sub(latest.Add(-slow/2)).Round(time.Millisecond))
		}
		return got
	}
	held := check("Acquire", func() (lease.Lease, error) { return l.Acquire(ctx, name, "owner-a", long) })
	check("Renew", func() (lease.Lease, error) { return l.Renew(ctx, held, long) })
}

// skewedClientsAgree: a Locker whose machine's clock runs ahead of the
// holder's (by twice the ttl) or behind it sees the same tenure: it gets
// ErrHeld before the holder's Deadline, and the name after the tenure
// ended by the store's clock. A store that judges expiry by each
// client's clock gives the name away early to a client whose clock is
// ahead, and keeps it from one whose clock is behind.
func skewedClientsAgree(t testing.TB, s *suite) {
	if s.h.NewSkewed == nil {
		t.Skip("single clock only: the Harness gives no NewSkewed, so expiry by the store's clock is not proven for Lockers whose clocks disagree")
	}
	if s.h.Advance != nil {
		t.Skip("with a simulated store clock, the store's expiry is not tied to the clients' real clocks")
	}
	holder := s.locker(t)
	skew := 2 * (s.h.TTL + s.h.Granularity)
	for _, d := range []time.Duration{skew, -skew} {
		other := s.h.NewSkewed(t, d)
		if other == nil {
			t.Fatal("Harness.NewSkewed returned nil")
		}
		t.Cleanup(func() { _ = other.Close() })
		name := s.name("skew")
		held, granted := s.acquire(t, holder, name, "owner-a", s.h.TTL)
		got, err := other.Acquire(t.Context(), name, "owner-b", long)
		returned := time.Now()
		switch {
		case err == nil && returned.Before(held.Deadline):
			t.Fatalf("a Locker whose clock is %s off acquired %q %s before the holder's Deadline (token %d after %d): the store judges expiry by the client's clock, not its own",
				d, name, held.Deadline.Sub(returned).Round(time.Millisecond), got.Token, held.Token)
		case err != nil && !errors.Is(err, lease.ErrHeld):
			failCall(t, "Acquire by a Locker whose clock is off", err)
		}
		if err == nil {
			continue // the tenure ended as the call ran: nothing to judge
		}
		s.expire(t, holder, name, s.h.TTL, granted)
		if _, err := other.Acquire(t.Context(), name, "owner-b", long); err != nil {
			if errors.Is(err, lease.ErrHeld) {
				t.Fatalf("a Locker whose clock is %s off was refused %q after the tenure expired by the store's clock: the store judges expiry by the client's clock (%v)", d, name, err)
			}
			failCall(t, "Acquire after expiry by a Locker whose clock is off", err)
		}
	}
}
