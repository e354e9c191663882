package sqllease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestRenewsShareStatements: on PostgreSQL, Renews that arrive while
// renewLanes of them are under way wait, and go out in one batch renewal
// statement, each with the outcome its own statement would give (an
// intact tenure renewed, a released one lost). A Renew whose context
// ends while it waits returns its context's error and is never sent.
// Without the sharing each Renew sends a statement of its own.
func TestRenewsShareStatements(t *testing.T) {
	s := postgresStore(t)
	var c counter
	l, err := New(countingDB(t, s, &c), WithTable(s.table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	prefix := fmt.Sprintf("shared-renew-%d/", time.Now().UnixNano())
	var held []lease.Lease
	for i := range 12 {
		ls, err := l.Acquire(ctx, fmt.Sprintf("%s%d", prefix, i), "me", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls)
	}
	gone := held[11]
	if err := l.Release(ctx, gone); err != nil {
		t.Fatal(err)
	}
	lanes, rest := held[:renewLanes], held[renewLanes:11]

	// Hold the lanes: the first renewLanes renewal statements wait
	// before they are sent.
	gate := make(chan struct{})
	began := make(chan struct{}, renewLanes)
	var mu sync.Mutex
	holding := 0
	c.mu.Lock()
	c.fail = func(q string) error {
		if !strings.Contains(q, "UPDATE") || strings.Contains(q, "json") {
			return nil
		}
		mu.Lock()
		hold := holding < renewLanes
		holding++
		mu.Unlock()
		if hold {
			began <- struct{}{}
			<-gate
		}
		return nil
	}
	c.mu.Unlock()
	errs := make(chan error, len(held)+1)
	var wg sync.WaitGroup
	for _, ls := range lanes {
		wg.Go(func() {
			_, err := l.Renew(ctx, ls, time.Minute)
			errs <- err
		})
	}
	for range renewLanes {
		select {
		case <-began:
		case <-time.After(10 * time.Second):
			t.Fatal("the lanes' Renews never reached the database")
		}
	}
	c.take()
	waitRenews := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); l.s.renews.Waiting() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d Renews wait; want %d", l.s.renews.Waiting(), n)
			}
		}
	}
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := l.Renew(short, rest[0], time.Minute); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for one of the") {
		t.Errorf("a Renew waiting past its deadline: %v; want DeadlineExceeded while waiting", err)
	}
	for _, ls := range rest {
		wg.Go(func() {
			_, err := l.Renew(ctx, ls, time.Minute)
			errs <- err
		})
	}
	waitRenews(len(rest))
	lost := make(chan error, 1)
	wg.Go(func() {
		_, err := l.Renew(ctx, gone, time.Minute)
		lost <- err
	})
	waitRenews(len(rest) + 1)
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Renew of an intact tenure: %v", err)
		}
	}
	if err := <-lost; !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew of a released tenure in the shared statement: %v; want ErrLost", err)
	}
	stmts, _ := c.take()
	singles, batches := 0, 0
	for _, st := range stmts {
		switch {
		case !strings.Contains(st.query, "UPDATE"):
		case strings.Contains(st.query, "json_array_elements"):
			batches++
		default:
			singles++
		}
	}
	// The lanes' statements, then one batch for the 10 that waited (the
	// one that gave up was never sent).
	if singles != renewLanes || batches != 1 {
		t.Errorf("%d Renews (%d of them waiting) sent %d renewal statements and %d batch statements; want %d and 1", len(held), len(rest)+1, singles, batches, renewLanes)
	}
}
