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

// sharedLanes is the pool of sharedStore's Locker: as many Renews (and
// Releases, without acquire slots on so small a pool) are under way
// before later ones wait to share a statement (poolLanes).
const sharedLanes = 2

// sharedStore returns a PostgreSQL Locker on a pool of sharedLanes
// connections whose statements c records, and n leases it holds on names
// of their own.
func sharedStore(t *testing.T, c *counter, n int) (*testStore, *Locker, []lease.Lease) {
	t.Helper()
	s := postgresStore(t)
	db := countingDB(t, s, c)
	db.SetMaxOpenConns(sharedLanes)
	l, err := New(db, WithTable(s.table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	prefix := fmt.Sprintf("shared-%d/", time.Now().UnixNano())
	var held []lease.Lease
	for i := range n {
		ls, err := l.Acquire(context.Background(), fmt.Sprintf("%s%d", prefix, i), "me", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls)
	}
	return s, l, held
}

// holdLanes makes c hold the first len(lanes) statements that single
// matches until the returned function is called, runs call for each of
// lanes (which must send such statements), one after the other (calls
// that arrive together may share a statement), and waits until they are
// held. The returned function lets them go and waits for the calls.
func holdLanes(t *testing.T, c *counter, single func(q string) bool, lanes []lease.Lease, call func(lease.Lease) error) (open func()) {
	t.Helper()
	gate := make(chan struct{})
	began := make(chan struct{}, len(lanes))
	var mu sync.Mutex
	holding := 0
	c.mu.Lock()
	c.fail = func(q string) error {
		if !single(q) {
			return nil
		}
		mu.Lock()
		hold := holding < len(lanes)
		holding++
		mu.Unlock()
		if hold {
			began <- struct{}{}
			<-gate
		}
		return nil
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, len(lanes))
	for _, ls := range lanes {
		wg.Go(func() { errs <- call(ls) })
		select {
		case <-began:
		case <-time.After(10 * time.Second):
			t.Fatal("the lanes' calls never reached the database")
		}
	}
	c.take()
	return func() {
		close(gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("a lane's call: %v", err)
			}
		}
	}
}

// waitWaiting waits until q has n calls waiting.
func waitWaiting(t *testing.T, q interface{ Waiting() int }, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); q.Waiting() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait; want %d", q.Waiting(), n)
		}
	}
}

// countShared counts the statements among stmts that match op: those
// with a batch document, and the others.
func countShared(stmts []sentStmt, op func(q string) bool) (singles, batches int) {
	for _, st := range stmts {
		switch {
		case !op(st.query):
		case strings.Contains(st.query, "json_array_elements"):
			batches++
		default:
			singles++
		}
	}
	return singles, batches
}

// TestRenewsShareStatements: on PostgreSQL, Renews that arrive while
// sharedLanes of them are under way wait, and go out in one batch renewal
// statement, each with the outcome its own statement would give (an
// intact tenure renewed, a released one lost). A Renew whose context
// ends while it waits returns its context's error and is never sent.
// Without the sharing each Renew sends a statement of its own.
func TestRenewsShareStatements(t *testing.T) {
	t.Parallel()
	var c counter
	_, l, held := sharedStore(t, &c, 12)
	ctx := context.Background()
	gone := held[11]
	if err := l.Release(ctx, gone); err != nil {
		t.Fatal(err)
	}
	lanes, rest := held[:sharedLanes], held[sharedLanes:11]
	isRenew := func(q string) bool { return strings.Contains(q, "SET expires_at = n.ms +") }
	open := holdLanes(t, &c, func(q string) bool { return isRenew(q) && !strings.Contains(q, "json") }, lanes, func(ls lease.Lease) error {
		_, err := l.Renew(ctx, ls, time.Minute)
		return err
	})

	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := l.Renew(short, rest[0], time.Minute); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for one of the") {
		t.Errorf("a Renew waiting past its deadline: %v; want DeadlineExceeded while waiting", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(rest))
	for _, ls := range rest {
		wg.Go(func() {
			_, err := l.Renew(ctx, ls, time.Minute)
			errs <- err
		})
	}
	waitWaiting(t, &l.s.renews, len(rest))
	lost := make(chan error, 1)
	wg.Go(func() {
		_, err := l.Renew(ctx, gone, time.Minute)
		lost <- err
	})
	waitWaiting(t, &l.s.renews, len(rest)+1)
	open()
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
	// The lanes' statements, then one batch for the 10 that waited (the
	// one that gave up was never sent).
	stmts, _ := c.take()
	if singles, batches := countShared(stmts, isRenew); singles != sharedLanes || batches != 1 {
		t.Errorf("%d Renews (%d of them waiting) sent %d renewal statements and %d batch statements; want %d and 1", len(held), len(rest)+1, singles, batches, sharedLanes)
	}
}

// TestReleasesShareStatements: on PostgreSQL, Releases that arrive while
// sharedLanes of them are under way wait, and go out in one batch release
// statement, each with the outcome its own statement would give: an
// intact tenure released (and its watcher woken), a released one lost,
// and of two Releases of one tenure, one released and one lost. Without
// the sharing each Release sends a statement of its own.
func TestReleasesShareStatements(t *testing.T) {
	t.Parallel()
	var c counter
	s, l, held := sharedStore(t, &c, 12)
	ctx := context.Background()
	gone := held[11]
	if err := l.Release(ctx, gone); err != nil {
		t.Fatal(err)
	}
	lanes, rest := held[:sharedLanes], held[sharedLanes:11]
	watcher := s.openLocker(t)
	w, err := watcher.Watch(ctx, rest[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	isRelease := func(q string) bool { return strings.Contains(q, "SET expires_at = -n.ms") }
	open := holdLanes(t, &c, func(q string) bool { return isRelease(q) && !strings.Contains(q, "json") }, lanes, func(ls lease.Lease) error {
		return l.Release(ctx, ls)
	})

	var wg sync.WaitGroup
	errs := make(chan error, len(rest))
	for _, ls := range rest {
		wg.Go(func() { errs <- l.Release(ctx, ls) })
	}
	twice := make(chan error, 2)
	for range 2 {
		wg.Go(func() { twice <- l.Release(ctx, rest[0]) })
	}
	lost := make(chan error, 1)
	wg.Go(func() { lost <- l.Release(ctx, gone) })
	waitWaiting(t, &l.s.releases, len(rest)+3)
	open()
	wg.Wait()
	close(errs)
	close(twice)
	failed := 0
	for err := range errs {
		switch {
		case errors.Is(err, lease.ErrLost):
			failed++ // rest[0]'s first Release may lose to one of the two below
		case err != nil:
			t.Errorf("Release of an intact tenure: %v", err)
		}
	}
	for err := range twice {
		switch {
		case errors.Is(err, lease.ErrLost):
			failed++
		case err != nil:
			t.Errorf("a second Release of one tenure: %v", err)
		}
	}
	if failed != 2 {
		t.Errorf("three Releases of one tenure in the shared statement: %d reported ErrLost; want 2", failed)
	}
	if err := <-lost; !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release of a released tenure in the shared statement: %v; want ErrLost", err)
	}
	select {
	case <-w.Changed():
	case <-time.After(10 * time.Second):
		t.Errorf("the watcher of %s heard nothing of its release in the shared statement", rest[1].Name)
	}
	for _, ls := range rest {
		if got, err := l.Inspect(ctx, ls.Name); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s after its Release: %+v, %v", ls.Name, got, err)
		}
	}
	stmts, _ := c.take()
	if singles, batches := countShared(stmts, isRelease); singles != sharedLanes || batches != 1 {
		t.Errorf("%d Releases (%d of them waiting) sent %d release statements and %d batch statements; want %d and 1", len(held)+2, len(rest)+3, singles, batches, sharedLanes)
	}
}
