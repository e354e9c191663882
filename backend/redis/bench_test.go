package redislease_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	redislease "github.com/leasekit/lease/backend/redis"
)

// benchLockers returns the stores to benchmark: miniredis always, and the
// real server when LEASE_TEST_REDIS is set.
func benchLockers(b *testing.B, fn func(b *testing.B, l *redislease.Locker)) {
	b.Run("miniredis", func(b *testing.B) {
		_, client, _ := newMiniredis(b)
		fn(b, mustNew(b, client))
	})
	b.Run("redis", func(b *testing.B) {
		var client *redis.Client
		client, _ = realRedis(b, -1)
		prefix := randomPrefix("bench")
		deleteKeys(b, client, prefix)
		fn(b, mustNew(b, client, redislease.WithPrefix(prefix)))
	})
}

// BenchmarkAcquireRelease measures a whole tenure: one Acquire of a free
// name and one Release, two round trips.
func BenchmarkAcquireRelease(b *testing.B) {
	benchLockers(b, func(b *testing.B, l *redislease.Locker) {
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			got, err := l.Acquire(ctx, "bench/"+strconv.Itoa(i%64), "owner", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx, got); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRenew measures renewing one held lease.
func BenchmarkRenew(b *testing.B) {
	benchLockers(b, func(b *testing.B, l *redislease.Locker) {
		ctx := context.Background()
		held, err := l.Acquire(ctx, "bench/renew", "owner", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if held, err = l.Renew(ctx, held, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInspect measures reading a held lease.
func BenchmarkInspect(b *testing.B) {
	benchLockers(b, func(b *testing.B, l *redislease.Locker) {
		ctx := context.Background()
		if _, err := l.Acquire(ctx, "bench/inspect", "owner", time.Minute); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := l.Inspect(ctx, "bench/inspect"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
