package redislease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/internal/testenv"
)

// TestConformanceMiniredisManualClock runs the suite on miniredis with a
// manual clock that moves both its TTLs and its TIME.
//
// There is no run on miniredis with its wall clock: unlike Redis, which is
// single-threaded and freezes expiry time during a script, miniredis lets
// the wall clock run while a goroutine running a script is preempted, so
// under the suite's parallel load a TTL and a TIME read in one script can
// disagree by tens of milliseconds. The real server checks wall-clock
// behaviour instead (TestConformanceRedis).
func TestConformanceMiniredisManualClock(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	_, client, advance := newMiniredis(t)
	conformance.Run(t, conformance.Harness{
		New:     func(tb testing.TB) lease.Locker { return mustNew(tb, client) },
		TTL:     50 * time.Millisecond,
		Advance: advance,
	})
}

// TestConformanceRedis runs the suite on the real server named by
// LEASE_TEST_REDIS, under a fresh key prefix that it deletes afterwards.
func TestConformanceRedis(t *testing.T) {
	client, _ := realRedis(t, -1)
	prefix := randomPrefix("conformance")
	deleteKeys(t, client, prefix)
	conformance.Run(t, conformance.Harness{
		New: func(tb testing.TB) lease.Locker { return mustNew(tb, client, redislease.WithPrefix(prefix)) },
		// Not 50ms: the suite's parallel subtests, the race detector and
		// other packages' tests share two CPUs in CI, and a Renew sent
		// 25ms into a 50ms tenure sometimes reached Redis after it expired.
		TTL: 200 * time.Millisecond,
		// The scripts judge expiry by the server's TIME and PEXPIRE: no
		// clock of the client's enters it.
		NewSkewed: func(tb testing.TB, _ time.Duration) lease.Locker {
			return mustNew(tb, client, redislease.WithPrefix(prefix))
		},
	})
}

// TestConformanceMiniredisCluster runs the suite through a go-redis
// Cluster client (miniredis answers CLUSTER SLOTS as a one-node cluster),
// so every script's keys go through Cluster slot routing and List takes
// its per-master path.
func TestConformanceMiniredisCluster(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	mr, _, advance := newMiniredis(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
	t.Cleanup(func() { _ = client.Close() })
	conformance.Run(t, conformance.Harness{
		New:     func(tb testing.TB) lease.Locker { return mustNew(tb, client) },
		TTL:     50 * time.Millisecond,
		Advance: advance,
	})
}

// TestConformanceMiniredisRing runs the suite through a go-redis Ring of
// two miniredis shards with one manual clock, then checks that List visits
// both shards.
func TestConformanceMiniredisRing(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	mr1, _, advance1 := newMiniredis(t)
	mr2, _, advance2 := newMiniredis(t)
	client := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": mr1.Addr(), "b": mr2.Addr()}})
	t.Cleanup(func() { _ = client.Close() })
	conformance.Run(t, conformance.Harness{
		New:     func(tb testing.TB) lease.Locker { return mustNew(tb, client) },
		TTL:     50 * time.Millisecond,
		Advance: func(d time.Duration) { advance1(d); advance2(d) },
	})

	l := mustNew(t, client)
	ctx := context.Background()
	const n = 40
	for i := 0; i < n; i++ {
		if _, err := l.Acquire(ctx, fmt.Sprintf("ring/%02d", i), "owner", time.Minute); err != nil {
			t.Fatalf("Acquire: %v", err)
		}
	}
	got, err := l.List(ctx, "ring/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(got) != n || got[0].Name != "ring/00" || got[n-1].Name != fmt.Sprintf("ring/%02d", n-1) {
		t.Fatalf("List over a two-shard ring returned %d of %d tenures", len(got), n)
	}
	if len(mr1.Keys()) == 0 || len(mr2.Keys()) == 0 {
		t.Fatalf("the ring's shards hold %d and %d keys; want both used", len(mr1.Keys()), len(mr2.Keys()))
	}
}
