package redislease_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/fairtest"
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
	newLocker := func(int) lease.Locker {
		opts, err := redis.ParseURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		l := mustNew(t, c, redislease.WithPrefix(prefix))
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	// Arrive one after another: each has queued before the next starts
	// (a first attempt is one round trip).
	fairtest.ArrivalOrder(t, holder, held, 10, newLocker, 20*time.Millisecond, func(int) { time.Sleep(50 * time.Millisecond) })
}
