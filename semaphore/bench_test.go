package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/internal/teststores"
	"github.com/leasekit/lease/semaphore"
)

// BenchmarkAcquire compares a semaphore of N slots with N separate names
// acquired by hand (try name-0, name-1, ... until one is free), on a
// half-full semaphore: each op takes a slot and releases it. Holders who
// acquire by hand fill the names from the first, so a newcomer by hand
// tries every held name first; the semaphore tries slots in a random
// order. requests/op counts the Locker calls (Release included): on a
// networked store each is a round trip, which dominates ns/op.
//
//	go test -run '^$' -bench Acquire -benchtime 2000x ./semaphore/
//
// With LEASE_TEST_POSTGRES set it also runs on PostgreSQL.
func BenchmarkAcquire(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) lease.Locker
	}{
		{"memory", func(*testing.B) lease.Locker { return memory.New() }},
		{"postgres", func(b *testing.B) lease.Locker { return postgresHarness(b).New(b) }},
	}
	for _, st := range stores {
		for _, n := range []int{1, 4, 64} {
			held := n / 2
			b.Run(fmt.Sprintf("%s/N=%d/semaphore", st.name, n), func(b *testing.B) {
				l := st.open(b)
				defer l.Close()
				ctx := context.Background()
				name := teststores.Random("bench-")
				for i := range held {
					if _, err := semaphore.Acquire(ctx, l, name, n, fmt.Sprintf("holder-%d", i), time.Hour); err != nil {
						b.Fatal(err)
					}
				}
				c := &counting{Locker: l}
				b.ResetTimer()
				for b.Loop() {
					s, err := semaphore.Acquire(ctx, c, name, n, "caller", time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Release(ctx, s.Lease); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(c.total())/float64(b.N), "requests/op")
			})
			b.Run(fmt.Sprintf("%s/N=%d/by-hand", st.name, n), func(b *testing.B) {
				l := st.open(b)
				defer l.Close()
				ctx := context.Background()
				name := teststores.Random("bench-")
				for i := range held {
					if _, err := byHand(ctx, l, name, n, fmt.Sprintf("holder-%d", i)); err != nil {
						b.Fatal(err)
					}
				}
				c := &counting{Locker: l}
				b.ResetTimer()
				for b.Loop() {
					got, err := byHand(ctx, c, name, n, "caller")
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Release(ctx, got); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(c.total())/float64(b.N), "requests/op")
			})
		}
	}
}

// byHand is what a program without package semaphore writes: n names,
// tried in turn until one is free.
func byHand(ctx context.Context, l lease.Locker, name string, n int, owner string) (lease.Lease, error) {
	for i := range n {
		got, err := l.Acquire(ctx, fmt.Sprintf("%s-%d", name, i), owner, time.Minute)
		if !errors.Is(err, lease.ErrHeld) {
			return got, err
		}
	}
	return lease.Lease{}, fmt.Errorf("all %d names are held: %w", n, lease.ErrHeld)
}
