package election_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/election"
)

// These tests run on the memory store inside testing/synctest bubbles: the
// bubble's clock is the store's and every Deadline's, so times are exact
// and nothing sleeps.

const ttl = 3 * time.Second

func newCandidate(t testing.TB, l lease.Locker, office string, opts ...election.Option) *election.Candidate {
	t.Helper()
	c, err := election.NewCandidate(l, office, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewCandidateRefusesBadInput(t *testing.T) {
	l := memory.New()
	for _, c := range []struct {
		name   string
		l      lease.Locker
		office string
		opts   []election.Option
		want   string
	}{
		{"nil Locker", nil, "o", nil, "nil Locker"},
		{"empty office", l, "", nil, "name is empty"},
		{"office not UTF-8", l, "\xff", nil, "not valid UTF-8"},
		{"ttl too short", l, "o", []election.Option{election.WithTTL(time.Millisecond)}, "WithTTL"},
		{"ttl negative", l, "o", []election.Option{election.WithTTL(-time.Second)}, "not positive"},
		{"empty ID", l, "o", []election.Option{election.WithID("")}, "ID is empty"},
		{"ID with a space", l, "o", []election.Option{election.WithID("node a")}, "may not contain spaces"},
		{"ID too long", l, "o", []election.Option{election.WithID(strings.Repeat("i", 243))}, "longer than the limit of 242"},
		{"metadata with NUL", l, "o", []election.Option{election.WithMetadata("a\x00")}, "NUL"},
		{"metadata too long", l, "o", []election.Option{election.WithID("node-a"), election.WithMetadata(strings.Repeat("m", 236))}, "room for 235"},
		{"nil option", l, "o", []election.Option{nil}, "option 0 is nil"},
	} {
		_, err := election.NewCandidate(c.l, c.office, c.opts...)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error matching lease.ErrInvalid that says %q", c.name, err, c.want)
		}
	}
	c, err := election.NewCandidate(l, "o", election.WithID("node-a"), election.WithMetadata(strings.Repeat("m", 235)))
	if err != nil || c.ID() != "node-a" || c.Office() != "o" {
		t.Errorf("the longest metadata for ID node-a: %v", err)
	}
}

// The term a leader gets is its lease: the number is the token, and the
// work's context carries the lease; Current reads the same.
func TestTermIsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newCandidate(t, store, "office", election.WithID("node-a"), election.WithMetadata("10.0.0.5:8080"))
		err := c.Lead(t.Context(), func(ctx context.Context, term election.Term) error {
			held, ok := lease.FromContext(ctx)
			if !ok || held.Token != term.Number || held.Owner != term.Owner {
				t.Errorf("term %+v; lease %v", term, held)
			}
			if term.Leader != "node-a" || term.Metadata != "10.0.0.5:8080" || term.Office != "office" {
				t.Errorf("term %+v", term)
			}
			if got, ok := c.Leading(); !ok || got != term {
				t.Errorf("Leading() = %+v, %v during the term", got, ok)
			}
			cur, err := election.Current(ctx, store.Share(), "office")
			if err != nil || cur != term {
				t.Errorf("Current = %+v, %v; want %+v", cur, err, term)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Leading(); ok {
			t.Error("Leading() after the term")
		}
		cur, err := election.Current(t.Context(), store, "office")
		if err != nil || !cur.Vacant() || cur.Office != "office" {
			t.Errorf("Current after the term = %+v, %v; want vacant", cur, err)
		}
	})
}

// Run's ends: the work returning on its own ends it with the work's
// error; Resign and the end of its context end it with nil; Lead told to
// stop before it was elected says so.
func TestRunEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newCandidate(t, store, "office")
		boom := errors.New("boom")
		if err := c.Run(t.Context(), func(context.Context, election.Term) error { return boom }); !errors.Is(err, boom) {
			t.Errorf("Run whose work fails: %v; want the work's error", err)
		}
		if err := c.Run(t.Context(), func(context.Context, election.Term) error { return nil }); err != nil {
			t.Errorf("Run whose work returns nil: %v", err)
		}

		// Resign while leading: nil from both, the work saw ErrResigned.
		var cause error
		done := make(chan error)
		go func() {
			done <- c.Run(t.Context(), func(ctx context.Context, _ election.Term) error {
				<-ctx.Done()
				cause = context.Cause(ctx)
				return ctx.Err()
			})
		}()
		synctest.Wait()
		if err := c.Resign(t.Context()); err != nil {
			t.Errorf("Resign: %v", err)
		}
		if err := <-done; err != nil || !errors.Is(cause, election.ErrResigned) {
			t.Errorf("Run after Resign: %v, work's cause %v; want nil and ErrResigned", err, cause)
		}
		if err := c.Resign(t.Context()); err != nil {
			t.Errorf("Resign with no campaign: %v", err)
		}

		// Told to stop while campaigning.
		other := newCandidate(t, store.Share(), "office")
		held, err := store.Acquire(t.Context(), "office", "someone", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- other.Lead(t.Context(), func(context.Context, election.Term) error { return nil }) }()
		synctest.Wait()
		_ = other.Resign(t.Context())
		if err := <-done; !errors.Is(err, election.ErrResigned) || !strings.Contains(err.Error(), "not elected") {
			t.Errorf("Lead resigned while campaigning: %v; want not elected, ErrResigned", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { done <- other.Run(ctx, func(context.Context, election.Term) error { return nil }) }()
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run whose context ended while campaigning: %v; want nil", err)
		}
		_ = store.Release(t.Context(), held)
	})
}

func TestOneCampaignAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCandidate(t, memory.New(), "office")
		done := make(chan error)
		go func() {
			done <- c.Run(t.Context(), func(ctx context.Context, _ election.Term) error { <-ctx.Done(); return nil })
		}()
		synctest.Wait()
		err := c.Lead(t.Context(), func(context.Context, election.Term) error { return nil })
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "campaigning already") {
			t.Errorf("Lead during Run: %v; want ErrInvalid", err)
		}
		if err := c.Run(t.Context(), nil); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Run with nil Work: %v; want ErrInvalid", err)
		}
		_ = c.Resign(t.Context())
		<-done
	})
}

// A voluntary handoff on a store that notifies: the old work winds down,
// returns, the lease is released, and the next candidate's work starts at
// that very instant.
func TestHandoffIsImmediateOnANotifyingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		const windDown = 300 * time.Millisecond
		var mu sync.Mutex
		var aEnded, bStarted time.Time
		a := newCandidate(t, store.Share(), "office", election.WithID("a"))
		b := newCandidate(t, store.Share(), "office", election.WithID("b"))
		aDone := make(chan error)
		go func() {
			aDone <- a.Run(t.Context(), func(ctx context.Context, _ election.Term) error {
				<-ctx.Done()
				time.Sleep(windDown)
				mu.Lock()
				aEnded = time.Now()
				mu.Unlock()
				return nil
			})
		}()
		synctest.Wait()
		bCtx, stopB := context.WithCancel(t.Context())
		bDone := make(chan error)
		go func() {
			bDone <- b.Run(bCtx, func(ctx context.Context, _ election.Term) error {
				mu.Lock()
				bStarted = time.Now()
				mu.Unlock()
				<-ctx.Done()
				return nil
			})
		}()
		time.Sleep(ttl) // b waits through renewals
		resigned := time.Now()
		if err := a.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-aDone; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mu.Lock()
		if got := aEnded.Sub(resigned); got != windDown {
			t.Errorf("a's work ended %s after Resign; want its wind-down, %s", got, windDown)
		}
		if !bStarted.Equal(aEnded) {
			t.Errorf("b's work started %s after a's ended; want the same instant (notified release)", bStarted.Sub(aEnded))
		}
		mu.Unlock()
		stopB()
		if err := <-bDone; err != nil {
			t.Fatal(err)
		}
	})
}

// A leader cut off from the store (its Locker closed): its work's context
// ends at its lease's Deadline, with a cause matching ErrLost, and the
// standby leads when the store's tenure expires (within the 1ms lease.Run
// adds to the holder's remaining time), never before.
func TestCutOffLeaderStopsAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		la := store.Share()
		a := newCandidate(t, la, "office", election.WithID("a"))
		b := newCandidate(t, store.Share(), "office", election.WithID("b"))
		var mu sync.Mutex
		var aEnded, bStarted time.Time
		var aCause error
		var aHeld lease.Lease
		aDone := make(chan error)
		go func() {
			aDone <- a.Run(t.Context(), func(ctx context.Context, _ election.Term) error {
				<-ctx.Done()
				mu.Lock()
				defer mu.Unlock()
				aEnded, aCause = time.Now(), context.Cause(ctx)
				aHeld, _ = lease.FromContext(ctx)
				return ctx.Err()
			})
		}()
		synctest.Wait()
		bCtx, stopB := context.WithCancel(t.Context())
		bDone := make(chan error)
		go func() {
			bDone <- b.Run(bCtx, func(ctx context.Context, _ election.Term) error {
				mu.Lock()
				bStarted = time.Now()
				mu.Unlock()
				<-ctx.Done()
				return nil
			})
		}()
		time.Sleep(ttl + ttl/2) // a renews a few times
		cur, err := election.Current(t.Context(), store, "office")
		if err != nil || cur.Leader != "a" {
			t.Fatalf("Current = %+v, %v; want a leading", cur, err)
		}
		_ = la.Close()
		err = <-aDone
		if !errors.Is(err, lease.ErrClosed) {
			t.Errorf("a's Run after its Locker closed: %v; want ErrClosed", err)
		}
		time.Sleep(ttl) // past the tenure's expiry
		synctest.Wait()
		mu.Lock()
		if !errors.Is(aCause, lease.ErrLost) {
			t.Errorf("a's work ended with cause %v; want ErrLost", aCause)
		}
		if !aEnded.Equal(aHeld.Deadline) {
			t.Errorf("a's work ended %s after its Deadline; want at it", aEnded.Sub(aHeld.Deadline))
		}
		// The store's clock is the bubble's: the tenure expires at Expires.
		if d := bStarted.Sub(aHeld.Expires); d < 0 || d > time.Millisecond {
			t.Errorf("b led %s after a's tenure expired; want within [0, 1ms]", d)
		}
		if margin := aHeld.Expires.Sub(aEnded); margin != lease.DriftMargin(ttl) {
			t.Errorf("a stopped %s before its tenure expired; want the drift margin %s", margin, lease.DriftMargin(ttl))
		}
		mu.Unlock()
		stopB()
		<-bDone
	})
}

// A term lost while the candidate runs (an operator force-releases it):
// the work's context ends with ErrLost, the callbacks pair up, and Run
// stands by and leads again with a larger term.
func TestRunCampaignsAgainAfterALostTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var mu sync.Mutex
		var log []string
		var terms []uint64
		c := newCandidate(t, store, "office",
			election.OnStartedLeading(func(term election.Term) {
				mu.Lock()
				defer mu.Unlock()
				log = append(log, "started")
				terms = append(terms, term.Number)
			}),
			election.OnStoppedLeading(func(term election.Term, err error) {
				mu.Lock()
				defer mu.Unlock()
				if errors.Is(err, lease.ErrLost) {
					log = append(log, "stopped: lost")
				} else {
					log = append(log, "stopped: "+errString(err))
				}
			}))
		var causes []error
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- c.Run(ctx, func(ctx context.Context, _ election.Term) error {
				<-ctx.Done()
				causes = append(causes, context.Cause(ctx))
				return ctx.Err()
			})
		}()
		synctest.Wait()
		if _, err := store.ForceRelease(t.Context(), "office"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl) // the next renewal finds the lease lost; Run campaigns again
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		want := "started, stopped: lost, started, stopped: <nil>"
		if got := strings.Join(log, ", "); got != want {
			t.Errorf("callbacks: %s; want %s", got, want)
		}
		if len(terms) != 2 || terms[1] <= terms[0] || len(causes) != 2 || !errors.Is(causes[0], lease.ErrLost) {
			t.Errorf("terms %v, causes %v; want two increasing terms, the first lost", terms, causes)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// The work panics: the lease is released, the stop callback reports the
// panic, and the panic goes on up.
func TestPanickingWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var stopped error
		c := newCandidate(t, store, "office", election.OnStoppedLeading(func(_ election.Term, err error) { stopped = err }))
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v; want the work's panic", r)
				}
			}()
			_ = c.Run(t.Context(), func(context.Context, election.Term) error { panic("boom") })
		}()
		if stopped == nil || !strings.Contains(stopped.Error(), "panicked") {
			t.Errorf("stop callback got %v; want a panic error", stopped)
		}
		if cur, err := election.Current(t.Context(), store, "office"); err != nil || !cur.Vacant() {
			t.Errorf("after the panic: %+v, %v; want the office released", cur, err)
		}
		// The candidate can campaign again.
		if err := c.Lead(t.Context(), func(context.Context, election.Term) error { return nil }); err != nil {
			t.Errorf("Lead after a panic: %v", err)
		}
	})
}

// flaky is a memory Locker whose first failures Acquires fail as a store
// outage would.
type flaky struct {
	*memory.Locker
	failures atomic.Int32
}

var errOutage = errors.New("store unreachable")

func (f *flaky) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if f.failures.Add(-1) >= 0 {
		return lease.Lease{}, errOutage
	}
	return f.Locker.Acquire(ctx, name, owner, ttl)
}

// A store outage while campaigning is retried with backoff, not returned.
func TestCampaignRetriesStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{Locker: memory.New()}
		f.failures.Store(5)
		c := newCandidate(t, f, "office")
		start := time.Now()
		var elected time.Time
		if err := c.Lead(t.Context(), func(context.Context, election.Term) error { elected = time.Now(); return nil }); err != nil {
			t.Fatal(err)
		}
		// Backoff 50, 100, 200, 400, 800ms, each jittered down to half.
		if d := elected.Sub(start); d < 775*time.Millisecond || d > 1550*time.Millisecond {
			t.Errorf("elected %s after five failures; want the backoff's 0.775s to 1.55s", d)
		}
	})
}

// bare is a Locker with none of the optional interfaces.
type bare struct{ lease.Locker }

// lineless is a Locker that keeps no line of waiters: it drops what the
// context carries to Acquire.
type lineless struct{ lease.Locker }

func (l lineless) Acquire(_ context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	return l.Locker.Acquire(context.Background(), name, owner, ttl)
}

// Campaigns that can never succeed are returned, not retried.
func TestCampaignPermanentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCandidate(t, lineless{memory.New()}, "office", election.WithFairWait())
		if err := c.Run(t.Context(), func(context.Context, election.Term) error { return nil }); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("WithFairWait on a Locker that keeps no line: %v; want ErrUnsupported", err)
		}
		l := memory.New()
		_ = l.Close()
		c = newCandidate(t, l, "office")
		if err := c.Run(t.Context(), func(context.Context, election.Term) error { return nil }); !errors.Is(err, lease.ErrClosed) {
			t.Errorf("Run on a closed Locker: %v; want ErrClosed", err)
		}
	})
}

// With WithFairWait, waiting candidates lead in the order they came.
func TestFairQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var mu sync.Mutex
		var order []string
		work := func(ctx context.Context, term election.Term) error {
			mu.Lock()
			order = append(order, term.Leader)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			return nil
		}
		first := newCandidate(t, store.Share(), "office", election.WithID("first"), election.WithFairWait())
		done := make(chan error, 5)
		go func() { done <- first.Lead(t.Context(), work) }()
		synctest.Wait()
		for _, id := range []string{"w1", "w2", "w3", "w4"} {
			c := newCandidate(t, store.Share(), "office", election.WithID(id), election.WithFairWait())
			go func() { done <- c.Lead(t.Context(), work) }()
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		for range 5 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		if got := strings.Join(order, " "); got != "first w1 w2 w3 w4" {
			t.Errorf("led in the order %s; want arrival order", got)
		}
	})
}

// A Work that resigns with its own context does not wait for itself: the
// term ends when it returns, and Run returns nil.
func TestResignFromTheWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCandidate(t, memory.New(), "office")
		var cause error
		err := c.Run(t.Context(), func(ctx context.Context, _ election.Term) error {
			if err := c.Resign(ctx); err != nil {
				return err
			}
			<-ctx.Done()
			cause = context.Cause(ctx)
			return ctx.Err()
		})
		if err != nil || !errors.Is(cause, election.ErrResigned) {
			t.Errorf("Run: %v, the work's cause %v; want nil and ErrResigned", err, cause)
		}
	})
}
