package semaphore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/semaphore"
)

// TestRoundTrips counts the requests one Acquire sends to the store, for
// N = 1, 4 and 64, on an empty semaphore, a half-full one, one with a
// single free slot, and a full one, averaged over many Acquires (the
// starting slot is random). Run with -v to see the table:
//
//	go test -run TestRoundTrips -v ./semaphore/
//
// Each request is one Locker.Acquire: one round trip on every backend of
// this module when the slot is free, two on etcd when it is held (see
// backend/etcd's round-trip table).
func TestRoundTrips(t *testing.T) {
	const trials = 400
	var table strings.Builder
	fmt.Fprintf(&table, "%4s  %-12s %8s %8s %8s\n", "N", "held", "min", "mean", "max")
	for _, n := range []int{1, 4, 64} {
		seen := map[int]bool{}
		for _, held := range []int{0, n / 2, n - 1, n} {
			if seen[held] {
				continue // the same row as another
			}
			seen[held] = true
			lo, hi, sum := int64(1<<62), int64(0), int64(0)
			for range trials {
				store := memory.New()
				ctx := context.Background()
				// The held slots are taken at random, as other holders would.
				for i := range held {
					if _, err := semaphore.Acquire(ctx, store, "rt", n, fmt.Sprintf("holder-%d", i), time.Minute); err != nil {
						t.Fatal(err)
					}
				}
				c := &counting{Locker: store}
				_, err := semaphore.Acquire(ctx, c, "rt", n, "caller", time.Minute)
				if (err == nil) != (held < n) {
					t.Fatalf("N=%d, %d held: Acquire: %v", n, held, err)
				}
				got := c.total()
				lo, hi, sum = min(lo, got), max(hi, got), sum+got
			}
			mean := float64(sum) / trials
			fmt.Fprintf(&table, "%4d  %-12s %8d %8.2f %8d\n", n, fmt.Sprintf("%d of %d", held, n), lo, mean, hi)
			switch {
			case held == 0 && (lo != 1 || hi != 1):
				t.Errorf("N=%d, empty: %d to %d requests; want exactly 1", n, lo, hi)
			case held == n && (lo != int64(n) || hi != int64(n)):
				t.Errorf("N=%d, full: %d to %d requests; want exactly N", n, lo, hi)
			case held < n && hi > int64(held+1):
				t.Errorf("N=%d, %d held: up to %d requests; want at most %d (one per held slot, then the free one)", n, held, hi, held+1)
			}
			// Expected tries with k of N held, in a random order:
			// (N+1)/(N-k+1), 2 at most at half full; allow for noise (a
			// random start going round, clustered, takes 2.5 at N = 64).
			if held == n/2 && held > 0 && mean > 2.3 {
				t.Errorf("N=%d, half full: %.2f requests on average; want about %.2f", n, mean, float64(n+1)/float64(n-held+1))
			}
		}
	}
	t.Logf("requests per Acquire (%d Acquires each):\n%s", trials, table.String())
}

// TestRunRoundTrips: Run on an empty semaphore whose work returns at once
// costs one Acquire and one Release.
func TestRunRoundTrips(t *testing.T) {
	c := &counting{Locker: memory.New()}
	err := semaphore.Run(t.Context(), c, "rt", 64, time.Minute, func(context.Context, semaphore.Slot) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if a, r, total := c.acquires.Load(), c.releases.Load(), c.total(); a != 1 || r != 1 || total != 2 {
		t.Errorf("Run: %d Acquires, %d Releases, %d requests in all; want 1, 1 and 2", a, r, total)
	}
}
