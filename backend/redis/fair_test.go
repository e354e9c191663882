package redislease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
)

// TestRunFairWaitAcrossClients: ten waiters, each with a client and Locker
// of its own (as ten processes would have), queue for a held name with
// WithFairWait and get it in the order they arrived, on the real server.
func TestRunFairWaitAcrossClients(t *testing.T) {
	admin, raw := realRedis(t, -1)
	prefix := randomPrefix("fair")
	deleteKeys(t, admin, prefix)
	holder := mustNew(t, admin, redislease.WithPrefix(prefix))
	t.Cleanup(func() { _ = holder.Close() })
	ctx := t.Context()
	held, err := holder.Acquire(ctx, "job", "holder", time.Minute)
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
		opts, err := redis.ParseURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		l := mustNew(t, c, redislease.WithPrefix(prefix))
		t.Cleanup(func() { _ = l.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := lease.Run(ctx, l, "job", 10*time.Second, func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				return nil
			}, lease.WithFairWait(30*time.Second))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
		}()
		// Arrive one after another: each has queued before the next
		// starts (a first attempt is one round trip).
		time.Sleep(50 * time.Millisecond)
	}
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(order) != waiters {
		t.Fatalf("%d of %d waiters ran: %v", len(order), waiters, order)
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters got the lease in the order %v, want arrival order", order)
		}
	}
}
