package sqllease

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestWithPoolSize checks that OpenConnector bounds its pool by default
// and by WithPoolSize, that bad sizes are refused, and that New, whose
// pool is the caller's, refuses the option and leaves the pool alone.
func TestWithPoolSize(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	l := s.openLocker(t)
	if got := l.s.db.Stats().MaxOpenConnections; got != DefaultMaxOpenConns {
		t.Errorf("OpenConnector's pool: at most %d connections; want DefaultMaxOpenConns, %d", got, DefaultMaxOpenConns)
	}
	l = s.openLocker(t, WithPoolSize(3, 1))
	if got := l.s.db.Stats().MaxOpenConnections; got != 3 {
		t.Errorf("OpenConnector with WithPoolSize(3, 1): at most %d connections; want 3", got)
	}
	for _, c := range [][2]int{{0, 0}, {-1, 0}, {2, 3}, {2, -1}} {
		_, err := OpenConnector(context.Background(), s.connector, WithPoolSize(c[0], c[1]))
		if !errors.Is(err, lease.ErrInvalid) || !contains(err, "WithPoolSize") {
			t.Errorf("OpenConnector with WithPoolSize(%d, %d): %v; want ErrInvalid naming WithPoolSize", c[0], c[1], err)
		}
	}
	if _, err := New(s.db, WithPoolSize(4, 2)); !errors.Is(err, lease.ErrInvalid) || !contains(err, "WithPoolSize") {
		t.Errorf("New with WithPoolSize: %v; want ErrInvalid naming WithPoolSize", err)
	}
	if got := s.db.Stats().MaxOpenConnections; got != 0 {
		t.Errorf("New changed the caller's pool: at most %d connections; want 0 (unbounded), as the caller left it", got)
	}
}

// TestAcquireSlots: a bounded pool keeps an eighth of its connections, at
// least two, out of reach of Acquire; an unbounded or tiny pool is not
// bounded further.
func TestAcquireSlots(t *testing.T) {
	t.Parallel()
	for maxOpen, want := range map[int]int{0: 0, 1: 0, 2: 0, 3: 1, 8: 6, 16: 14, 32: 28, 64: 56} {
		if got := cap(acquireSlots(maxOpen)); got != want {
			t.Errorf("a pool of %d connections lets %d Acquires run at once; want %d", maxOpen, got, want)
		}
	}
}

// TestBurstOfAcquiresLeavesConnections: a burst of Acquires on a pool of 8
// never holds more than 6 connections, so a renewal always finds one; an
// Acquire waiting for its turn ends with its context, as a store error;
// and a Release takes the same turns.
func TestBurstOfAcquiresLeavesConnections(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		l := s.openLocker(t, WithPoolSize(8, 8))
		ctx := context.Background()
		setup, err := l.Acquire(ctx, "burst/setup", "o", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		done := make(chan struct{})
		peak := 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				peak = max(peak, l.s.db.Stats().InUse)
				select {
				case <-done:
					return
				default:
					runtime.Gosched()
				}
			}
		}()
		var burst sync.WaitGroup
		for i := range 64 {
			burst.Add(1)
			go func() {
				defer burst.Done()
				for j := range 5 {
					if _, err := l.Acquire(ctx, fmt.Sprintf("burst/%d/%d", i, j), "o", time.Minute); err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
				}
			}()
		}
		burst.Wait()
		close(done)
		wg.Wait()
		if peak > 6 {
			t.Errorf("a burst of Acquires held %d of the pool's 8 connections; want at most 6", peak)
		}
		t.Logf("peak connections in use by the burst: %d of 8", peak)

		for range cap(l.s.acquireSlots) {
			l.s.acquireSlots <- struct{}{}
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err = l.Acquire(short, "burst/late", "o", time.Minute)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrHeld) || !contains(err, "Acquires under way") {
			t.Errorf("Acquire waiting for a slot past its deadline: %v; want a context error naming the wait", err)
		}
		// Releases take the same turns: a storm of them (thousands of
		// Runs ending together) leaves the renewals their connections.
		short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel2()
		err = l.Release(short2, setup)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrLost) || !contains(err, "Releases under way") {
			t.Errorf("Release waiting for a slot past its deadline: %v; want a context error naming the wait", err)
		}
		for range cap(l.s.acquireSlots) {
			<-l.s.acquireSlots
		}
		if _, err := l.Acquire(ctx, "burst/late", "o", time.Minute); err != nil {
			t.Errorf("Acquire once the slots are free: %v", err)
		}
		if err := l.Release(ctx, setup); err != nil {
			t.Errorf("Release once the slots are free: %v", err)
		}
	})
}
