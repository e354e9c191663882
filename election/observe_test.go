package election_test

import (
	"context"
	"errors"
	"fmt"
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

// report is one thing Observe yielded, and when.
type report struct {
	at   time.Time
	term election.Term
	err  error
}

// observe runs Observe in a goroutine until ctx ends, and returns a
// function that returns what it yielded so far.
func observe(ctx context.Context, l lease.Locker, office string, opts ...election.ObserveOption) func() []report {
	var mu sync.Mutex
	var got []report
	go func() {
		for t, err := range election.Observe(ctx, l, office, opts...) {
			mu.Lock()
			got = append(got, report{time.Now(), t, err})
			mu.Unlock()
		}
	}()
	return func() []report {
		mu.Lock()
		defer mu.Unlock()
		return append([]report(nil), got...)
	}
}

func describe(rs []report) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n\t%s %v %v", r.at.Format("15:04:05.000"), r.term, r.err)
	}
	return b.String()
}

// On a store that notifies releases, the observer reports the vacancy at
// the instant of the release, and a leader elected a second later within
// the poll interval of its election.
func TestObserveReleaseAndElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		got := observe(ctx, store.Share(), "office")
		synctest.Wait() // the vacant office reported
		a := newCandidate(t, store.Share(), "office", election.WithID("a"))
		done := make(chan error)
		go func() {
			done <- a.Run(ctx, func(ctx context.Context, _ election.Term) error { <-ctx.Done(); return nil })
		}()
		time.Sleep(5 * time.Second)
		released := time.Now()
		_ = a.Resign(ctx)
		<-done
		synctest.Wait()
		time.Sleep(time.Second)
		b := newCandidate(t, store.Share(), "office", election.WithID("b"))
		elected := time.Now()
		go func() {
			done <- b.Lead(ctx, func(ctx context.Context, _ election.Term) error { <-ctx.Done(); return nil })
		}()
		time.Sleep(2 * time.Second)
		rs := got()
		if len(rs) != 4 || !rs[0].term.Vacant() || rs[1].term.Leader != "a" || !rs[2].term.Vacant() || rs[3].term.Leader != "b" {
			t.Fatalf("reports: %s; want vacant, a, vacant, b", describe(rs))
		}
		if !rs[2].at.Equal(released) {
			t.Errorf("the vacancy was reported %s after the release; want at once", rs[2].at.Sub(released))
		}
		if d := rs[3].at.Sub(elected); d < 0 || d > election.DefaultPollInterval {
			t.Errorf("b was reported %s after its election; want within the poll interval", d)
		}
		stop()
		<-done
	})
}

// counting counts a memory Locker's Inspects (it keeps Watch).
type counting struct {
	*memory.Locker
	inspects atomic.Int32
}

func (c *counting) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	c.inspects.Add(1)
	return c.Locker.Inspect(ctx, name)
}

// While a leader holds the office, the observer reads it when the term is
// due to expire, not in a busy loop: with a 3s ttl renewed every second,
// every 2s or so.
func TestObserveReadsAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		a := newCandidate(t, store.Share(), "office")
		done := make(chan error)
		go func() {
			done <- a.Run(ctx, func(ctx context.Context, _ election.Term) error { <-ctx.Done(); return nil })
		}()
		synctest.Wait()
		c := &counting{Locker: store.Share()}
		got := observe(ctx, c, "office", election.WithPollInterval(time.Minute))
		time.Sleep(20 * time.Second)
		if n := c.inspects.Load(); n < 7 || n > 12 {
			t.Errorf("%d reads in 20s of one term (ttl %s); want about one per 2s", n, ttl)
		}
		if rs := got(); len(rs) != 1 {
			t.Errorf("reports: %s; want the one term", describe(rs))
		}
		stop()
		<-done
	})
}

// On a Locker without notifications, a release is noticed within the poll
// interval.
func TestObservePollsWithoutNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		a := newCandidate(t, store.Share(), "office")
		done := make(chan error)
		go func() {
			done <- a.Run(ctx, func(ctx context.Context, _ election.Term) error { <-ctx.Done(); return nil })
		}()
		synctest.Wait()
		got := observe(ctx, bare{store.Share()}, "office", election.WithPollInterval(500*time.Millisecond))
		time.Sleep(2200 * time.Millisecond)
		released := time.Now()
		_ = a.Resign(ctx)
		<-done
		time.Sleep(time.Second)
		rs := got()
		if len(rs) != 2 || !rs[1].term.Vacant() {
			t.Fatalf("reports: %s; want a's term, then vacant", describe(rs))
		}
		if d := rs[1].at.Sub(released); d < 0 || d > 500*time.Millisecond {
			t.Errorf("the release was noticed %s later; want within the 500ms poll interval", d)
		}
	})
}

// scripted is a Locker whose Inspect answers from a script, one step per
// call (the last step repeats): for checking what Observe does with
// answers a real store gives only in rare races (a stale read, an error).
type scripted struct {
	lease.Locker // nil: only Inspect is called
	mu           sync.Mutex
	steps        []step
	calls        []time.Time
}

type step struct {
	token   uint64 // 0: not held
	expires time.Duration
	err     error
}

func (s *scripted) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, time.Now())
	st := s.steps[min(len(s.calls)-1, len(s.steps)-1)]
	switch {
	case st.err != nil:
		return lease.Lease{}, st.err
	case st.token == 0:
		return lease.Lease{}, fmt.Errorf("scripted: %w", lease.ErrNotHeld)
	}
	return lease.Lease{Name: name, Owner: fmt.Sprintf("n%d 0123456789ab", st.token), Token: st.token, Expires: time.Now().Add(st.expires)}, nil
}

// A term number lower than one reported is never reported; a vacancy
// between two reads of one term is; store errors are yielded and the loop
// goes on.
func TestObserveNeverGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		outage := errors.New("outage")
		s := &scripted{steps: []step{
			{token: 5, expires: 10 * time.Millisecond},
			{token: 5, expires: 10 * time.Millisecond}, // renewed: no report
			{token: 3, expires: 10 * time.Millisecond}, // stale: no report
			{},
			{}, // still vacant: no report
			{token: 4, expires: 10 * time.Millisecond}, // stale: no report
			{token: 5, expires: 10 * time.Millisecond}, // seen again after a vacancy
			{err: outage},
			{token: 7, expires: 10 * time.Millisecond},
			{token: 6, expires: time.Hour}, // stale
		}}
		ctx, stop := context.WithTimeout(t.Context(), 10*time.Second)
		defer stop()
		var got []string
		for term, err := range election.Observe(ctx, s, "office") {
			switch {
			case err != nil:
				got = append(got, "error: "+err.Error())
			case term.Vacant():
				got = append(got, "vacant")
			default:
				got = append(got, fmt.Sprintf("%s %d", term.Leader, term.Number))
			}
		}
		want := "n5 5, vacant, n5 5, error: election: reading office \"office\": outage, n7 7"
		if g := strings.Join(got, ", "); g != want {
			t.Errorf("reports:\n\t%s\nwant\n\t%s", g, want)
		}
	})
}

// When a term outlives its expiry (the store's expiry lag) or the office
// is vacant, reads back off from 10ms to the poll interval; breaking the
// loop stops them.
func TestObserveBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{steps: []step{{token: 5, expires: -time.Second}}}
		for range election.Observe(t.Context(), s, "office") {
			time.Sleep(3 * time.Second)
			break
		}
		// The loop reads on only when the consumer asks for the next
		// report: one read.
		s.mu.Lock()
		if len(s.calls) != 1 {
			t.Errorf("%d reads; want one, the loop being broken after the first report", len(s.calls))
		}
		s.calls = nil
		s.mu.Unlock()
		ctx, stop := context.WithTimeout(t.Context(), 2*time.Second)
		defer stop()
		start := time.Now()
		for range election.Observe(ctx, s, "office") {
		}
		var gaps []string
		for _, c := range s.calls {
			gaps = append(gaps, c.Sub(start).String())
		}
		want := "0s 10ms 30ms 70ms 150ms 310ms 630ms 1.27s" // then 1s apart
		if g := strings.Join(gaps, " "); g != want {
			t.Errorf("reads at %s; want %s", g, want)
		}
	})
}

func TestObserveRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		name   string
		l      lease.Locker
		office string
		opts   []election.ObserveOption
		want   string
	}{
		{"nil Locker", nil, "o", nil, "nil Locker"},
		{"empty office", memory.New(), "", nil, "name is empty"},
		{"short interval", memory.New(), "o", []election.ObserveOption{election.WithPollInterval(time.Microsecond)}, "at least 1ms"},
		{"nil option", memory.New(), "o", []election.ObserveOption{nil}, "option 0 is nil"},
	} {
		n := 0
		for term, err := range election.Observe(t.Context(), c.l, c.office, c.opts...) {
			n++
			if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.want) || !term.Vacant() {
				t.Errorf("%s: %v, %v; want a vacant term and an error matching ErrInvalid that says %q", c.name, term, err, c.want)
			}
		}
		if n != 1 {
			t.Errorf("%s: %d reports; want the error alone", c.name, n)
		}
	}
	if _, err := election.Current(t.Context(), nil, "o"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Current with a nil Locker: %v", err)
	}
}
