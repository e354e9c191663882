// Package fairtest holds the test of lease.Run's WithFairWait that every
// store with a queue runs: waiters that arrive one after another get the
// lease in the order they arrived.
package fairtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// ArrivalOrder runs n lease.Run calls with WithFairWait on held's name
// while holder holds it with held. The i-th runs on the Locker locker(i)
// returns (one per waiter stands for separate processes), and holds the
// lease for hold; after starting it, ArrivalOrder calls arrived(i), which
// returns once that waiter has joined the line, before starting the next.
// Then holder releases, and ArrivalOrder fails t unless every waiter ran,
// in the order they arrived.
func ArrivalOrder(t testing.TB, holder lease.Locker, held lease.Lease, n int, locker func(i int) lease.Locker, hold time.Duration, arrived func(i int)) {
	t.Helper()
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		l := locker(i)
		wg.Go(func() {
			err := lease.Run(context.Background(), l, held.Name, 10*time.Second, func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(hold)
				return nil
			}, lease.WithFairWait(time.Minute))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
		})
		arrived(i)
	}
	if err := holder.Release(context.Background(), held); err != nil {
		t.Errorf("release by the holder: %v", err)
	}
	wg.Wait()
	if len(order) != n {
		t.Fatalf("%d of %d waiters ran: %v", len(order), n, order)
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters got the lease in the order %v, want arrival order", order)
		}
	}
}
