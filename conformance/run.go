package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// lease.Run over the store: the helper programs call.

// runHoldsAndReleases: Run holds the lease while fn runs and releases it after.
func runHoldsAndReleases(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("run")
	var inside lease.Lease
	err := lease.Run(t.Context(), l, name, long, func(ctx context.Context) error {
		got, ok := lease.FromContext(ctx)
		if !ok {
			// Not returned as fn's error, which Run passes on and which
			// would then read as the store failing.
			t.Error("fn's context carries no lease")
			return nil
		}
		inside = got
		s.mustHold(t, l, got, "inside Run")
		_, err := l.Acquire(ctx, name, "intruder", long)
		s.mustBeHeld(t, "Acquire by another owner inside Run", err, name, got.Owner, long)
		return nil
	})
	if err != nil {
		failCall(t, "Run", err)
	}
	if inside.Token == 0 {
		return // fn's context had no lease: already failed
	}
	s.mustBeFree(t, l, name, "after Run returned")
	if _, err := l.Renew(t.Context(), inside, long); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew of the lease Run released: got %v, want ErrLost", err)
	}
}

// runBusyNeverCallsFn: Run returns HeldError without calling fn when the lease is busy.
func runBusyNeverCallsFn(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("run-busy")
	s.acquire(t, l, name, "owner-a", long)
	called := false
	err := lease.Run(t.Context(), l, name, long, func(context.Context) error { called = true; return nil })
	if called {
		t.Fatal("Run called fn while another owner held the lease")
	}
	s.mustBeHeld(t, "Run", err, name, "owner-a", long)
}

// runConcurrentOnlyOne: two concurrent Runs for one name: only one runs fn.
func runConcurrentOnlyOne(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("run-concurrent")
	var running, ran atomic.Int32
	release := make(chan struct{})
	results := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			results <- lease.Run(t.Context(), l, name, long, func(context.Context) error {
				if running.Add(1) > 1 {
					t.Error("two Runs are inside fn at once")
				}
				ran.Add(1)
				<-release // stay inside until the other Run has returned
				running.Add(-1)
				return nil
			})
		}()
	}
	var errs []error
	limit := time.After(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-results:
			errs = append(errs, err)
			break wait
		case <-tick.C:
			if running.Load() > 1 {
				break wait // both are inside fn: already a failure
			}
		case <-limit:
			break wait
		}
	}
	close(release)
	for len(errs) < 2 {
		select {
		case err := <-results:
			errs = append(errs, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("a Run did not return after fn did (ran %d times)", ran.Load())
		}
	}
	if len(errs) == 2 && ran.Load() == 0 {
		if isStoreFailure(errs[0]) && isStoreFailure(errs[1]) {
			failCall(t, "both Runs", errs[0])
		}
		t.Fatalf("neither Run entered fn: %v; %v", errs[0], errs[1])
	}
	if ran.Load() != 1 {
		t.Fatalf("fn ran %d times, want once", ran.Load())
	}
	if !errors.Is(errs[0], lease.ErrHeld) {
		t.Fatalf("the first Run to return got %v; want ErrHeld, since the other was inside fn", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("the Run that held the lease returned %v", errs[1])
	}
}

// runCancelsOnLoss: Run cancels fn's context with ErrLost when a renewal finds the lease lost.
func runCancelsOnLoss(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("run-lost")
	ttl := max(s.h.TTL, time.Second) * 6
	every := ttl / 10
	err := lease.Run(t.Context(), l, name, ttl, func(ctx context.Context) error {
		held, _ := lease.FromContext(ctx)
		// Someone ends the tenure behind fn's back (an operator's forced
		// release, or a takeover after a long pause).
		if err := l.Release(t.Context(), held); err != nil {
			t.Errorf("Release behind Run's back: %v", err)
		}
		released := time.Now()
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), lease.ErrLost) {
				t.Errorf("fn's context ended with cause %v, want one matching ErrLost", context.Cause(ctx))
			}
			// The next renewal (a batch of one, where the Locker is a
			// has RenewBatch) finds the loss: the work stops then, not at
			// the Deadline a store error would let it run to.
			if d := time.Since(released); d > 3*every+time.Second && s.h.Advance == nil {
				t.Errorf("fn's context ended %s after its lease was released behind its back, renewing every %s (Deadline %s after the release): the renewal that found the loss did not stop the work",
					d.Round(time.Millisecond), every, held.Deadline.Sub(released).Round(time.Millisecond))
			}
			return nil
		case <-time.After(2 * ttl):
			t.Error("fn's context was not cancelled after its lease was released behind its back")
			return nil
		}
	}, lease.WithRenewEvery(every))
	if !errors.Is(err, lease.ErrLost) {
		if isStoreFailure(err) && !errors.Is(err, context.Canceled) {
			failCall(t, "Run", err)
		}
		t.Fatalf("Run returned %v; want an error matching ErrLost", err)
	}
}

// runRenewsWhileFnRuns: Run renews the lease while fn outlives the ttl.
func runRenewsWhileFnRuns(t testing.TB, s *suite) {
	if s.h.Advance != nil {
		t.Skip("with a simulated store clock, real time does not expire tenures")
	}
	l := s.locker(t)
	name := s.name("run-renew")
	// At least two seconds, so that renewals every ttl/3 survive a loaded
	// machine's delays: under CI's full parallel run one store write
	// (a SQLite and a PostgreSQL renewal, each behind other tests' disk
	// flushes) was seen to take 650ms, longer than the 1s ttl this case
	// had left after a renewal.
	ttl := max(s.h.TTL, 2*time.Second) + s.h.Granularity
	err := lease.Run(t.Context(), l, name, ttl, func(ctx context.Context) error {
		held, _ := lease.FromContext(ctx)
		end := time.Now().Add(2*ttl + s.h.ExpiryLag)
		for time.Now().Before(end) {
			_, err := l.Acquire(t.Context(), name, "intruder", long)
			if err == nil {
				t.Error("another owner acquired the lease while Run was renewing it")
				return nil
			}
			if !errors.Is(err, lease.ErrHeld) {
				t.Errorf("Acquire by another owner: %v", err)
				return nil
			}
			select {
			case <-ctx.Done():
				t.Errorf("fn's context ended while renewals should keep the lease: %v", context.Cause(ctx))
				return nil
			case <-time.After(ttl / 4):
			}
		}
		now, _ := lease.FromContext(ctx)
		if now.Token != held.Token {
			t.Errorf("the token changed from %d to %d across renewals", held.Token, now.Token)
		}
		return nil
	})
	if err != nil {
		failCall(t, "Run", err)
	}
}

// lateGrants is a Locker whose Acquire answers only after the Deadline of
// the tenure it granted has passed: a store that granted at once but whose
// reply was held up in the network.
type lateGrants struct{ lease.Locker }

func (l lateGrants) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	got, err := l.Locker.Acquire(ctx, name, owner, ttl)
	if err == nil {
		time.Sleep(time.Until(got.Deadline) + 5*time.Millisecond)
	}
	return got, err
}

// runLateGrantNeverEntersFn: Run never enters fn when the grant arrives
// after its Deadline; it releases the tenure and reports the store as too
// slow (context.DeadlineExceeded), not as held or lost.
func runLateGrantNeverEntersFn(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("run-late")
	err := lease.Run(t.Context(), lateGrants{l}, name, s.h.TTL, func(context.Context) error {
		t.Error("Run entered fn after the lease's Deadline")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) {
		if isStoreFailure(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			failCall(t, "Run with a late grant", err)
		}
		t.Fatalf("Run with a grant that arrived after its Deadline returned %v; want an error matching context.DeadlineExceeded and neither ErrHeld nor ErrLost", err)
	}
	// Released at once, not left to expire.
	s.mustBeFree(t, l, name, "after Run gave back the late grant")
}
