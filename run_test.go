package lease_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/internal/fairtest"
)

var errStore = errors.New("store is down")

// flaky wraps a Locker with injected failures.
type flaky struct {
	lease.Locker
	renewFailures atomic.Int32 // Renew fails with errStore this many times
	renewHang     bool         // Renew blocks until its context ends, like an unreachable store
	releaseErr    error
	releases      atomic.Int32
}

func (f *flaky) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if f.renewHang {
		<-ctx.Done()
		return lease.Lease{}, ctx.Err()
	}
	if f.renewFailures.Add(-1) >= 0 {
		return lease.Lease{}, errStore
	}
	return f.Locker.Renew(ctx, l, ttl)
}

func (f *flaky) Release(ctx context.Context, l lease.Lease) error {
	f.releases.Add(1)
	if f.releaseErr != nil {
		return f.releaseErr
	}
	return f.Locker.Release(ctx, l)
}

func mustBeFree(t *testing.T, l lease.Locker, name string) {
	t.Helper()
	if got, err := l.Inspect(context.Background(), name); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect(%q) = %v, %v; want ErrNotHeld", name, got, err)
	}
}

func TestRunPropagatesFnErrorAndReleases(t *testing.T) {
	l := memory.New()
	boom := errors.New("boom")
	err := lease.Run(context.Background(), l, "job", time.Second, func(context.Context) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Run = %v, want fn's error alone", err)
	}
	mustBeFree(t, l, "job")
}

func TestRunReleasesAndRepanicsWhenFnPanics(t *testing.T) {
	l := memory.New()
	defer func() {
		if r := recover(); r != "kaboom" {
			t.Fatalf("recovered %v, want the panic to go on", r)
		}
		mustBeFree(t, l, "job")
	}()
	_ = lease.Run(context.Background(), l, "job", time.Second, func(context.Context) error { panic("kaboom") })
	t.Fatal("Run returned after fn panicked")
}

func TestRunWithoutRenewalCancelsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		var cause error
		err := lease.Run(context.Background(), l, "job", 100*time.Millisecond, func(ctx context.Context) error {
			<-ctx.Done()
			cause = context.Cause(ctx)
			held, _ := lease.FromContext(ctx)
			if time.Now().Before(held.Deadline) {
				t.Errorf("fn's context ended %s before the Deadline", time.Until(held.Deadline))
			}
			return nil
		}, lease.WithoutRenewal())
		if !errors.Is(cause, lease.ErrLost) || !errors.Is(err, lease.ErrLost) {
			t.Fatalf("cause %v, Run %v; want both to match ErrLost", cause, err)
		}
	})
}

func TestRunRetriesTransientRenewalFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{Locker: memory.New()}
		f.renewFailures.Store(2)
		err := lease.Run(context.Background(), f, "job", 300*time.Millisecond, func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(time.Second):
				return nil
			}
		}, lease.WithRenewEvery(60*time.Millisecond))
		if err != nil {
			t.Fatalf("Run = %v; two failed renewals well within the ttl must not lose the lease", err)
		}
	})
}

func TestRunCancelsWhenRenewalHangsPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{Locker: memory.New(), renewHang: true}
		err := lease.Run(context.Background(), f, "job", 150*time.Millisecond, func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(5 * time.Second):
				return errors.New("fn's context outlived the Deadline while a renewal hung")
			}
		})
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Run = %v, want ErrLost", err)
		}
		if !strings.Contains(err.Error(), "deadline passed") {
			t.Fatalf("Run = %v, want it to say the deadline passed", err)
		}
	})
}

func TestRunReportsReleaseFailureWithoutHidingFnResult(t *testing.T) {
	f := &flaky{Locker: memory.New(), releaseErr: errStore}
	boom := errors.New("boom")
	err := lease.Run(context.Background(), f, "job", time.Second, func(context.Context) error { return boom })
	if !errors.Is(err, boom) || !errors.Is(err, errStore) {
		t.Fatalf("Run = %v, want both fn's error and the release error", err)
	}
	if errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Run = %v: a store failure at release is not a lost lease", err)
	}
}

func TestRunReportsLeaseFoundLostAtRelease(t *testing.T) {
	clock := memory.NewManualClock(time.Now())
	l := memory.New(memory.WithClock(clock))
	err := lease.Run(context.Background(), l, "job", time.Minute, func(ctx context.Context) error {
		clock.Advance(2 * time.Minute) // the store expires the tenure under fn
		return nil
	}, lease.WithoutRenewal())
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Run = %v, want ErrLost: exclusivity may have been broken", err)
	}
}

func TestRunWaitsForABusyLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		held, err := l.Acquire(context.Background(), "job", "other", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(100*time.Millisecond, func() { _ = l.Release(context.Background(), held) })
		ran := false
		err = lease.Run(context.Background(), l, "job", time.Second, func(context.Context) error { ran = true; return nil }, lease.WithWait(5*time.Second))
		if err != nil || !ran {
			t.Fatalf("Run = %v, ran = %v; want it to wait for the release and run", err, ran)
		}
	})
}

func TestRunGivesUpWaitingWithTheHeldError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		if _, err := l.Acquire(context.Background(), "job", "other", time.Minute); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := lease.Run(context.Background(), l, "job", time.Second, func(context.Context) error { return nil }, lease.WithWait(150*time.Millisecond))
		var he *lease.HeldError
		if !errors.As(err, &he) || he.Owner != "other" {
			t.Fatalf("Run = %v, want the *HeldError naming the holder", err)
		}
		if waited := time.Since(start); waited < 150*time.Millisecond {
			t.Fatalf("Run gave up after %s, before the wait of 150ms", waited)
		}
	})
}

func TestRunWaitingEndsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		if _, err := l.Acquire(context.Background(), "job", "other", time.Minute); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := lease.Run(ctx, l, "job", time.Second, func(context.Context) error { return nil }, lease.WithWait(time.Hour))
		// Both facts hold: the wait ended with the context, and the name was
		// held by "other" all along.
		var he *lease.HeldError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &he) || he.Owner != "other" {
			t.Fatalf("Run = %v, want an error matching the context's error and ErrHeld, with the *HeldError naming the holder", err)
		}
	})
}

func TestRunMinHoldKeepsTheLeaseAfterFnReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		done := make(chan error, 1)
		go func() {
			done <- lease.Run(context.Background(), l, "job", 100*time.Millisecond, func(context.Context) error { return nil }, lease.WithMinHold(400*time.Millisecond))
		}()
		time.Sleep(250 * time.Millisecond) // past fn's end and past one ttl: renewals must go on
		if _, err := l.Inspect(context.Background(), "job"); err != nil {
			t.Fatalf("Inspect during the min-hold = %v, want the lease still held", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		mustBeFree(t, l, "job")
	})
}

func TestRunRejectsBadArguments(t *testing.T) {
	l := memory.New()
	fn := func(context.Context) error { return nil }
	for what, err := range map[string]error{
		"nil fn":            lease.Run(context.Background(), l, "job", time.Second, nil),
		"nil locker":        lease.Run(context.Background(), nil, "job", time.Second, fn),
		"renew after ttl":   lease.Run(context.Background(), l, "job", time.Second, fn, lease.WithRenewEvery(time.Second)),
		"empty name":        lease.Run(context.Background(), l, "", time.Second, fn),
		"zero ttl":          lease.Run(context.Background(), l, "job", 0, fn),
		"negative min-hold": lease.Run(context.Background(), l, "job", time.Second, fn, lease.WithMinHold(-1)),
	} {
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Run with %s = %v, want ErrInvalid", what, err)
		}
	}
}

func TestRunPassesStoreErrorsFromAcquire(t *testing.T) {
	l := memory.New()
	_ = l.Close()
	err := lease.Run(context.Background(), l, "job", time.Second, func(context.Context) error { return nil })
	if !errors.Is(err, lease.ErrClosed) || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Run on a closed store = %v, want ErrClosed and not ErrHeld", err)
	}
}

// slowAcquire never answers Acquire until its context ends, like a store
// that is unreachable behind a client that retries.
type slowAcquire struct{ lease.Locker }

func (s slowAcquire) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	<-ctx.Done()
	return lease.Lease{}, ctx.Err()
}

func TestRunGivesUpOnAnAcquireSlowerThanTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		err := lease.Run(context.Background(), slowAcquire{memory.New()}, "job", 100*time.Millisecond, func(context.Context) error {
			t.Error("fn ran without the lease")
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrHeld) {
			t.Fatalf("Run = %v, want the store's timeout, not ErrHeld", err)
		}
	})
}

// lateAcquire is a store whose grants arrive late: the tenure is granted
// (and its Deadline stamped) when the request reaches the store, but the
// answer takes delay to come back, like a reply held up in the network.
type lateAcquire struct {
	lease.Locker
	delay time.Duration
}

func (s lateAcquire) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	got, err := s.Locker.Acquire(ctx, name, owner, ttl)
	time.Sleep(s.delay)
	return got, err
}

func TestRunNeverEntersFnAfterTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		err := lease.Run(context.Background(), lateAcquire{l, 300 * time.Millisecond}, "job", 200*time.Millisecond, func(context.Context) error {
			t.Error("fn was entered after the lease's Deadline")
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) {
			t.Fatalf("Run = %v, want a store timeout (context.DeadlineExceeded), not held or lost", err)
		}
		// The late tenure was released unused, not left to expire.
		mustBeFree(t, l, "job")
	})
}

func TestRunNeverEntersFnAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The answer comes exactly when the Deadline passes.
		ttl := 200 * time.Millisecond
		l := memory.New()
		err := lease.Run(context.Background(), lateAcquire{l, ttl - lease.DriftMargin(ttl)}, "job", ttl, func(context.Context) error {
			t.Error("fn was entered at the lease's Deadline")
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want a store timeout", err)
		}
	})
}

func TestRunEntersFnWhenTheGrantComesBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ttl := 200 * time.Millisecond
		var left time.Duration
		err := lease.Run(context.Background(), lateAcquire{memory.New(), 150 * time.Millisecond}, "job", ttl, func(ctx context.Context) error {
			held, _ := lease.FromContext(ctx)
			left = time.Until(held.Deadline)
			return nil
		}, lease.WithoutRenewal())
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		if want := ttl - lease.DriftMargin(ttl) - 150*time.Millisecond; left != want {
			t.Fatalf("fn was entered with %s left before the Deadline, want %s", left, want)
		}
	})
}

func TestRunBoundsAcquireByTheDeadlineItWouldGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ttl := 100 * time.Millisecond
		start := time.Now()
		err := lease.Run(context.Background(), slowAcquire{memory.New()}, "job", ttl, func(context.Context) error {
			t.Error("fn ran without the lease")
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want the store's timeout", err)
		}
		if took, want := time.Since(start), ttl-lease.DriftMargin(ttl); took != want {
			t.Fatalf("Run gave up on Acquire after %s, want exactly the Deadline it would have granted (%s)", took, want)
		}
	})
}

func TestRunRejectsBadOptions(t *testing.T) {
	l := memory.New()
	fn := func(context.Context) error { return nil }
	for what, opt := range map[string]lease.RunOption{
		"WithRenewEvery(-1)": lease.WithRenewEvery(-1),
		"WithRenewEvery(0)":  lease.WithRenewEvery(0),
		"WithWait(-1s)":      lease.WithWait(-time.Second),
		"WithMinHold(-1)":    lease.WithMinHold(-1),
	} {
		err := lease.Run(context.Background(), l, "job", time.Second, fn, opt)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), strings.SplitN(what, "(", 2)[0]) {
			t.Errorf("Run with %s = %v, want ErrInvalid naming the option", what, err)
		}
	}
}

// countingAcquires counts Acquire calls on a Locker that can watch.
type countingAcquires struct {
	*memory.Locker
	acquires atomic.Int32
}

func (c *countingAcquires) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	c.acquires.Add(1)
	return c.Locker.Acquire(ctx, name, owner, ttl)
}

func TestRunWaitingWakesOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &countingAcquires{Locker: memory.New()}
		held, err := l.Locker.Acquire(context.Background(), "job", "other", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		released := make(chan time.Time, 1)
		time.AfterFunc(10*time.Second, func() {
			_ = l.Release(context.Background(), held)
			released <- time.Now()
		})
		var entered time.Time
		err = lease.Run(context.Background(), l, "job", time.Minute, func(context.Context) error {
			entered = time.Now()
			return nil
		}, lease.WithWait(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if lag := entered.Sub(<-released); lag != 0 {
			t.Fatalf("fn started %s after the release; a watching waiter wakes at once", lag)
		}
		// One attempt before the wait, one per fallback interval while the
		// holder kept it (10s / 2s), and the one that won.
		if n := l.acquires.Load(); n > 7 {
			t.Fatalf("%d Acquire attempts over a 10s wait: the waiter polled instead of watching", n)
		}
	})
}

func TestRunFairWaitServesWaitersInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		held, err := l.Acquire(context.Background(), "job", "first", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		fairtest.ArrivalOrder(t, l, held, 10, func(int) lease.Locker { return l }, 100*time.Millisecond,
			func(int) { time.Sleep(10 * time.Millisecond) }) // arrive one after another
	})
}

func TestRunFairWaitGivesUpItsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		held, _ := l.Acquire(context.Background(), "job", "holder", time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := lease.Run(ctx, l, "job", time.Minute, func(context.Context) error { return nil }, lease.WithFairWait(time.Hour))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v", err)
		}
		_ = l.Release(context.Background(), held)
		// The waiter that gave up left the line: a newcomer's fair Run is
		// first, and takes the name without waiting.
		if err := lease.Run(context.Background(), l, "job", time.Minute, func(context.Context) error { return nil }, lease.WithFairWait(0)); err != nil {
			t.Fatalf("a fair Run after the only waiter gave up = %v", err)
		}
	})
}

// lineless is a Locker that keeps no line of waiters: it drops what the
// context carries.
type lineless struct{ *memory.Locker }

func (l lineless) Acquire(_ context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	return l.Locker.Acquire(context.Background(), name, owner, ttl)
}

// WithFairWait on a Locker that keeps no line fails at once, naming the
// option, and leaves the name free.
func TestRunFairWaitNeedsALine(t *testing.T) {
	l := lineless{memory.New()}
	err := lease.Run(context.Background(), l, "job", time.Second, func(context.Context) error {
		t.Error("fn ran")
		return nil
	}, lease.WithFairWait(time.Second))
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "WithFairWait") {
		t.Fatalf("Run = %v, want errors.ErrUnsupported naming WithFairWait", err)
	}
	if got, err := l.Inspect(context.Background(), "job"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("after the refused Run, Inspect = %v, %v; want the name free", got, err)
	}
}

func TestRunStopsRenewingOnceFnsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		ctx, cancel := context.WithCancel(context.Background())
		var took time.Time
		err := lease.Run(ctx, l, "job", time.Second, func(fnCtx context.Context) error {
			held, _ := lease.FromContext(fnCtx)
			cancel() // the caller wants fn to stop; fn takes its time
			time.Sleep(3 * time.Second)
			if _, err := l.Acquire(context.Background(), "job", "next", time.Minute); err == nil {
				took = time.Now()
			}
			if !took.After(held.Deadline) {
				t.Errorf("another owner took the lease at %v, the holder's Deadline was %v", took, held.Deadline)
			}
			return nil
		})
		if took.IsZero() {
			t.Fatal("the lease was still renewed after fn's context ended")
		}
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Run = %v, want ErrLost: fn outlived its lease", err)
		}
	})
}

// TestRunWaitersOfOneProcessTakeTurns: waiters of one process on one
// Locker queue locally, so a release wakes one Acquire, not one per
// waiter, and they get the name in arrival order.
func TestRunWaitersOfOneProcessTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &countingAcquires{Locker: memory.New()}
		held, err := l.Locker.Acquire(context.Background(), "job", "first", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 10
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := lease.Run(context.Background(), l, "job", 10*time.Second, func(context.Context) error {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					time.Sleep(100 * time.Millisecond)
					return nil
				}, lease.WithWait(time.Minute))
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
				}
			}()
			time.Sleep(10 * time.Millisecond) // arrive one after another
		}
		_ = l.Release(context.Background(), held)
		wg.Wait()
		for i, w := range order {
			if w != i {
				t.Fatalf("waiters got the lease in the order %v, want arrival order", order)
			}
		}
		// One attempt each on arrival, and one per handoff; a herd would
		// take 10+9+...+1 more.
		if n := l.acquires.Load(); n > 2*waiters {
			t.Fatalf("%d Acquire attempts for %d handoffs to %d waiters, want at most %d", n, waiters, waiters, 2*waiters)
		}
	})
}

// TestRunNextWaiterTriesWhenTheHeadGivesUp: when the first waiter of the
// process gives up, the next tries at once (the name may have been freed
// just then), and the one after stays queued.
func TestRunNextWaiterTriesWhenTheHeadGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &countingAcquires{Locker: memory.New()}
		held, err := l.Locker.Acquire(context.Background(), "job", "first", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		hctx, cancelHead := context.WithCancel(context.Background())
		headErr := make(chan error, 1)
		run := func(ctx context.Context, done chan<- error) {
			done <- lease.Run(ctx, l, "job", time.Minute, func(context.Context) error { return nil }, lease.WithWait(time.Hour))
		}
		go run(hctx, headErr)
		time.Sleep(100 * time.Millisecond)
		second, third := make(chan error, 1), make(chan error, 1)
		go run(context.Background(), second)
		go run(context.Background(), third)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		before := l.acquires.Load() // one attempt each on arrival
		cancelHead()
		if err := <-headErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("the head: %v, want context.Canceled", err)
		}
		synctest.Wait()
		if n := l.acquires.Load() - before; n != 1 {
			t.Fatalf("%d Acquire attempts when the head gave up, want 1 (the next waiter's, at once)", n)
		}
		_ = l.Release(context.Background(), held)
		for _, c := range []chan error{second, third} {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestRunWaitersOfOtherLockersDoNotHerd: Runs waiting on five Lockers of
// one store (five processes) each make one attempt per turn, not one per
// release: a release wakes the Locker whose mark is oldest, not all five.
func TestRunWaitersOfOtherLockersDoNotHerd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New()
		held, err := m.Acquire(context.Background(), "job", "first", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		const n = 5
		lockers := make([]*countingAcquires, n)
		done := make(chan error, n)
		var order []int
		var mu sync.Mutex
		for i := range lockers {
			lockers[i] = &countingAcquires{Locker: m.Share()}
			go func() {
				done <- lease.Run(context.Background(), lockers[i], "job", time.Minute, func(context.Context) error {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					return nil
				}, lease.WithWait(time.Hour))
			}()
			time.Sleep(time.Millisecond) // arrive in order
		}
		synctest.Wait()
		attempts := func() (sum int32) {
			for _, l := range lockers {
				sum += l.acquires.Load()
			}
			return sum
		}
		before := attempts() // one busy attempt each, which marks
		if err := m.Release(context.Background(), held); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if got := attempts() - before; got != n {
			t.Errorf("%d Acquire attempts for %d handoffs, want one each (woken one Locker at a time)", got, n)
		}
		if want := []int{0, 1, 2, 3, 4}; !slices.Equal(order, want) {
			t.Errorf("Lockers held the name in order %v, want the order of their marks %v", order, want)
		}
	})
}

// TestRunLockersTakeTurns: two Lockers with three waiting Runs each take
// turns at the name: a Locker that acquires while others of its Runs
// still wait puts its mark at the back, behind the other Locker's.
func TestRunLockersTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New()
		held, err := m.Acquire(context.Background(), "job", "first", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		lockers := []*countingAcquires{{Locker: m.Share()}, {Locker: m.Share()}}
		const each = 3
		done := make(chan error, 2*each)
		var order []int
		var mu sync.Mutex
		for range each {
			for i, l := range lockers {
				go func() {
					done <- lease.Run(context.Background(), l, "job", time.Minute, func(context.Context) error {
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
						time.Sleep(10 * time.Millisecond)
						return nil
					}, lease.WithWait(time.Hour))
				}()
				time.Sleep(time.Millisecond)
			}
		}
		synctest.Wait()
		before := lockers[0].acquires.Load() + lockers[1].acquires.Load()
		if err := m.Release(context.Background(), held); err != nil {
			t.Fatal(err)
		}
		for range 2 * each {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if want := []int{0, 1, 0, 1, 0, 1}; !slices.Equal(order, want) {
			t.Errorf("Lockers held the name in order %v, want them to alternate %v", order, want)
		}
		if got := lockers[0].acquires.Load() + lockers[1].acquires.Load() - before; got != 2*each {
			t.Errorf("%d Acquire attempts for %d handoffs, want one each", got, 2*each)
		}
	})
}
