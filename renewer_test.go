package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

// batchCounter counts RenewBatch calls and the tenures in them.
type batchCounter struct {
	*memory.Locker
	calls, tenures atomic.Int64
}

func (b *batchCounter) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	b.calls.Add(1)
	b.tenures.Add(int64(len(leases)))
	return b.Locker.RenewBatch(ctx, leases, ttls)
}

func TestRunsOnOneLockerRenewInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const runs, ttl, hold = 1200, 6 * time.Second, 20 * time.Second
		l := &batchCounter{Locker: memory.New()}
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- lease.Run(context.Background(), l, fmt.Sprintf("job-%d", i), ttl, func(ctx context.Context) error {
					select {
					case <-time.After(hold):
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
		}
		// Every Run renews about every 2s for 20s: some 10 sweeps of 1200
		// renewals. One call per renewal would be 12000 calls; the goal is
		// at most a fiftieth of that.
		calls, tenures := l.calls.Load(), l.tenures.Load()
		if tenures < runs*8 {
			t.Fatalf("%d renewals for %d Runs holding %s with a ttl of %s: too few", tenures, runs, hold, ttl)
		}
		if calls*50 > tenures {
			t.Fatalf("%d RenewBatch calls for %d renewals: the renewer did not coalesce them", calls, tenures)
		}
		t.Logf("%d renewals in %d calls", tenures, calls)
	})
}

func TestRenewerEndsOnlyTheLostRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.New()
		ctx := context.Background()
		keep := make(chan error, 1)
		go func() {
			keep <- lease.Run(ctx, l, "kept", time.Second, func(ctx context.Context) error {
				select {
				case <-time.After(5 * time.Second):
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})
		}()
		err := lease.Run(ctx, l, "lost", time.Second, func(ctx context.Context) error {
			held, _ := lease.FromContext(ctx)
			if _, err := l.ForceRelease(context.Background(), held.Name); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		})
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("the Run whose lease was force-released returned %v, want ErrLost", err)
		}
		if err := <-keep; err != nil {
			t.Fatalf("the other Run on the same Locker returned %v", err)
		}
	})
}

func TestRenewalsKeepTheirOwnTTLAndInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &batchCounter{Locker: memory.New()}
		var got []lease.Lease
		err := lease.Run(context.Background(), l, "job", 3*time.Second, func(ctx context.Context) error {
			for range 5 {
				time.Sleep(time.Second)
				held, _ := lease.FromContext(ctx)
				got = append(got, held)
			}
			return nil
		}, lease.WithRenewEvery(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// Renewed about every second (±10%), so four or five renewals in
		// five seconds, each moving the Deadline.
		if n := l.tenures.Load(); n < 4 || n > 6 {
			t.Fatalf("%d renewals in 5s at one per second", n)
		}
		if !got[len(got)-1].Deadline.After(got[0].Deadline) {
			t.Fatal("the Deadline did not move with renewals")
		}
	})
}

func TestRenewalIsDueFromWhenTheGrantWasSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The grant takes 70% of the ttl to come back: renewing a third of
		// the ttl after the answer would come after the Deadline.
		err := lease.Run(context.Background(), lateAcquire{memory.New(), 2100 * time.Millisecond}, "job", 3*time.Second, func(ctx context.Context) error {
			select {
			case <-time.After(5 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		if err != nil {
			t.Fatalf("Run = %v; a slow grant must be renewed before its Deadline", err)
		}
	})
}

// slowBatches is a batchCounter whose every RenewBatch call takes a
// round trip of rtt.
type slowBatches struct {
	batchCounter
	rtt time.Duration
}

func (b *slowBatches) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	time.Sleep(b.rtt)
	return b.batchCounter.RenewBatch(ctx, leases, ttls)
}

// A renewal call that takes time must not turn the renewer into a stream
// of small calls, each carrying the few renewals that came within reach
// while the previous one was out: renewals are sent when the earliest is
// due, with those due within an eighth of their interval, and the next
// call waits until the next renewal is due.
func TestSlowRenewalCallsStillCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const runs, ttl, hold = 1200, 6 * time.Second, 20 * time.Second
		l := &slowBatches{batchCounter: batchCounter{Locker: memory.New()}, rtt: 5 * time.Millisecond}
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Started over a second, as jobs arriving from a queue.
				time.Sleep(time.Duration(i) * time.Second / runs)
				errs <- lease.Run(context.Background(), l, fmt.Sprintf("job-%d", i), ttl, func(ctx context.Context) error {
					select {
					case <-time.After(hold):
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
		}
		calls, tenures := l.calls.Load(), l.tenures.Load()
		if tenures < runs*8 {
			t.Fatalf("%d renewals for %d Runs holding %s with a ttl of %s: too few", tenures, runs, hold, ttl)
		}
		if calls*50 > tenures {
			t.Fatalf("%d RenewBatch calls of %s each for %d renewals: the renewer sent what came due during each call in a call of its own", calls, l.rtt, tenures)
		}
		t.Logf("%d renewals in %d calls", tenures, calls)
	})
}

// overlapping is a batchCounter whose RenewBatch calls take a round trip
// of rtt each, and which records how many were under way at once.
type overlapping struct {
	batchCounter
	rtt           time.Duration
	inflight, max atomic.Int64
}

func (b *overlapping) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	n := b.inflight.Add(1)
	for {
		m := b.max.Load()
		if n <= m || b.max.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(b.rtt)
	b.inflight.Add(-1)
	return b.batchCounter.RenewBatch(ctx, leases, ttls)
}

// The calls of one sweep go out together: one after another, a store
// slowed by load takes the sum of their times, and the last call's
// Deadlines can pass before it is sent. Here each call takes 1.5s and a
// sweep of 1,600 Runs needs two or more calls; sent one after another,
// the last would come 3s into a renewal interval of 2s.
func TestSweepCallsGoTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const runs, ttl, hold = 1600, 6 * time.Second, 10 * time.Second
		l := &overlapping{batchCounter: batchCounter{Locker: memory.New()}, rtt: 1500 * time.Millisecond}
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		for i := range runs {
			wg.Go(func() {
				errs <- lease.Run(context.Background(), l, fmt.Sprintf("job-%d", i), ttl, func(ctx context.Context) error {
					select {
					case <-time.After(hold):
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
		}
		if l.max.Load() < 2 {
			t.Fatalf("at most %d RenewBatch call under way at once; want the calls of a sweep together", l.max.Load())
		}
	})
}

// keepsNothing is a Locker with batch renewal but no Shared method: Run
// keeps no state for it anywhere (no process-wide map), so each Run
// renews on its own.
type keepsNothing struct {
	l              *memory.Locker
	calls, tenures atomic.Int64
}

func (k *keepsNothing) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	return k.l.Acquire(ctx, name, owner, ttl)
}
func (k *keepsNothing) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	return k.l.Renew(ctx, l, ttl)
}
func (k *keepsNothing) Release(ctx context.Context, l lease.Lease) error { return k.l.Release(ctx, l) }
func (k *keepsNothing) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	return k.l.Inspect(ctx, name)
}
func (k *keepsNothing) Close() error { return k.l.Close() }
func (k *keepsNothing) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	k.calls.Add(1)
	k.tenures.Add(int64(len(leases)))
	return k.l.RenewBatch(ctx, leases, ttls)
}

// The Runs on a Locker that keeps no shared state renew one by one, and
// the Runs on two Locker values of one store never share a renewer: the
// renewer lives in the Locker (driver.Locker.Shared), not in a map of
// the process's.
func TestRenewerLivesInTheLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const runs, ttl, hold = 20, 6 * time.Second, 10 * time.Second
		k := &keepsNothing{l: memory.New()}
		a := &batchCounter{Locker: memory.New()}
		b := &batchCounter{Locker: a.Share()}
		var wg sync.WaitGroup
		for i := range runs {
			for _, l := range []lease.Locker{k, a, b} {
				wg.Go(func() {
					err := lease.Run(context.Background(), l, fmt.Sprintf("job-%T-%p-%d", l, l, i), ttl, func(ctx context.Context) error {
						time.Sleep(hold)
						return nil
					})
					if err != nil {
						t.Errorf("Run = %v", err)
					}
				})
			}
		}
		wg.Wait()
		if c, n := k.calls.Load(), k.tenures.Load(); c != n || n == 0 {
			t.Errorf("a Locker that keeps nothing: %d renewals in %d calls; want one call per renewal", n, c)
		}
		for name, l := range map[string]*batchCounter{"a": a, "b": b} {
			if c, n := l.calls.Load(), l.tenures.Load(); n < runs*4 || c*10 > n {
				t.Errorf("Locker %s: %d renewals in %d calls; want its own Runs' renewals batched", name, n, c)
			}
		}
	})
}
