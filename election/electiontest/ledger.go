package electiontest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
	"github.com/leasekit/lease/fence"
)

// ledger is the shared fence the Works of one case write to: each Work's
// start and end are guarded writes under its term number, so a Work that
// ends after a later term's Work started is refused (fence.ErrStale), and
// the timestamps, taken under the fence's lock, order every start and end.
//
// One overlap is allowed, the one no lease can prevent: a leader cut off
// from the store (its Locker closed) stops at its lease's Deadline by its
// own timer, and a timer on a loaded machine fires a little late. The
// promise is that the Deadline comes before the store can elect anyone
// else and that the Work's context is then cancelled with lease.ErrLost;
// so a Work whose context ended with lease.ErrLost counts as ended at its
// Deadline if it recorded its end later (fencing tokens are what protect
// the data from those last moments).
type ledger struct {
	office string
	f      fence.Memory
	// ttl and lag are the Harness's TTL and ExpiryLag, for messages.
	ttl, lag time.Duration

	mu    sync.Mutex
	spans []span
	errs  []string
}

// span is one term's Work, as the ledger saw it.
type span struct {
	term       uint64
	leader     string
	start, end time.Time
	ended      bool
	refused    bool      // the fence refused its end: a later term had started
	deadline   time.Time // its lease's Deadline when it ended
	cause      error     // context.Cause of the Work's context when it ended, if it had ended
}

// stopped is when the span's Work stopped acting as the leader: when it
// ended, or, if its leadership was lost, at the latest at its Deadline.
func (s span) stopped() time.Time {
	if errors.Is(s.cause, lease.ErrLost) && !s.deadline.IsZero() && s.deadline.Before(s.end) {
		return s.deadline
	}
	return s.end
}

// newLedger returns the ledger of one case's office.
func (s *suite) newLedger(office string) *ledger {
	return &ledger{office: office, ttl: s.h.TTL, lag: s.h.ExpiryLag}
}

// begin records the start of t's Work and returns its index.
func (g *ledger) begin(t election.Term) int {
	i := -1
	err := g.f.Guard(context.Background(), g.office, t.Number, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.spans = append(g.spans, span{term: t.Number, leader: t.Leader, start: time.Now()})
		i = len(g.spans) - 1
		return nil
	})
	if err != nil {
		g.fail("term %d (leader %s) started while a later term had started already: %v", t.Number, t.Leader, err)
	}
	return i
}

// end records the end of the Work begun as i, with its context's cause
// and its lease's Deadline.
func (g *ledger) end(ctx context.Context, i int, t election.Term) {
	held, _ := lease.FromContext(ctx)
	cause := context.Cause(ctx)
	record := func(refused bool) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if i >= 0 {
			g.spans[i].end, g.spans[i].ended, g.spans[i].refused = time.Now(), true, refused
			g.spans[i].cause, g.spans[i].deadline = cause, held.Deadline
		}
	}
	err := g.f.Guard(context.Background(), g.office, t.Number, func() error { record(false); return nil })
	if err != nil {
		record(true) // checkSpans judges it
	}
}

func (g *ledger) fail(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, fmt.Sprintf(format, args...))
}

// work is a Work that records itself in the ledger: it holds the office
// for hold (until its context ends when hold is zero), then, if its
// context was cancelled, takes windDown to stop, as real work winding
// down would. It returns its context's error when that ended it.
func (g *ledger) work(hold, windDown time.Duration) election.Work {
	return func(ctx context.Context, t election.Term) error {
		i := g.begin(t)
		if hold > 0 {
			timer := time.NewTimer(hold)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
			timer.Stop()
		} else {
			<-ctx.Done()
		}
		if ctx.Err() != nil && windDown > 0 {
			time.Sleep(windDown)
		}
		g.end(ctx, i, t)
		return ctx.Err()
	}
}

// renewingWork is a Work that records itself in the ledger, as work(0,
// 0) does, and every so often (every) records in seen the Deadline of its
// lease as of the latest renewal (lease.FromContext), until its context
// ends.
func (g *ledger) renewingWork(seen *renewals, every time.Duration) election.Work {
	return func(ctx context.Context, t election.Term) error {
		i := g.begin(t)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ctx.Err() == nil && n < 100000; n++ {
			// Only a Deadline read while the term lasted: a renewal
			// applied after the context ended gave the work nothing.
			if l, ok := lease.FromContext(ctx); ok && ctx.Err() == nil {
				seen.add(t.Number, time.Now(), l.Deadline)
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		<-ctx.Done()
		g.end(ctx, i, t)
		return ctx.Err()
	}
}

// renewals are the Deadlines a Work saw its lease renewed to, in the
// first term it recorded.
type renewals struct {
	mu   sync.Mutex
	term uint64
	seen []renewal
}

// renewal is a Deadline, and when the Work first saw it.
type renewal struct{ at, deadline time.Time }

// add records d, seen at at in term, unless it is the Deadline seen last
// or term is not the first term recorded.
func (r *renewals) add(term uint64, at, d time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.term == 0 {
		r.term = term
	}
	if term != r.term {
		return
	}
	if n := len(r.seen); n == 0 || !r.seen[n-1].deadline.Equal(d) {
		r.seen = append(r.seen, renewal{at, d})
	}
}

// last returns the latest Deadline seen, or the zero time.
func (r *renewals) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return time.Time{}
	}
	return r.seen[len(r.seen)-1].deadline
}

// describe says, relative to from, when the lease was granted and last
// seen renewed, and to which Deadlines.
func (r *renewals) describe(from time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return "the leader's work never saw its lease"
	}
	rel := func(t time.Time) string { return t.Sub(from).Round(time.Millisecond).String() }
	first, last := r.seen[0], r.seen[len(r.seen)-1]
	return fmt.Sprintf("the leader's lease, seen at %s with Deadline %s, was seen renewed %d times, last at %s to Deadline %s (times from the start of its work)",
		rel(first.at), rel(first.deadline), len(r.seen)-1, rel(last.at), rel(last.deadline))
}

// snapshot returns the spans in order of start.
func (g *ledger) snapshot() []span {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.spans)
	sortSpans(out)
	return out
}

// sortSpans sorts spans by start.
func sortSpans(spans []span) {
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
}

// find returns the span of term n.
func (g *ledger) find(n uint64) (span, bool) {
	for _, s := range g.snapshot() {
		if s.term == n {
			return s, true
		}
	}
	return span{}, false
}

// check fails t unless every Work ended before the next one started and
// the terms strictly increase in order of start. It returns the spans.
func (g *ledger) check(t testing.TB) []span {
	t.Helper()
	g.mu.Lock()
	errs := slices.Clone(g.errs)
	g.mu.Unlock()
	for _, e := range errs {
		t.Errorf("%s (ttl %s, expiry lag %s)", e, g.ttl, g.lag)
	}
	spans := g.snapshot()
	if err := checkSpans(spans); err != nil {
		t.Errorf("%v (ttl %s, expiry lag %s; handoffs %s)", err, g.ttl, g.lag, handoffs(spans))
	}
	for _, s := range spans {
		if s.refused && errors.Is(s.cause, lease.ErrLost) {
			t.Logf("term %d (leader %s) lost its lease; its work recorded its end %s after its Deadline (a late timer on a loaded machine), after the next term started, which the Deadline allows", s.term, s.leader, s.end.Sub(s.stopped()))
		}
	}
	return spans
}

// checkSpans reports the first overlap or term out of order in spans,
// sorted by start; the last span may still be running.
func checkSpans(spans []span) error {
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		switch {
		case b.term <= a.term:
			return fmt.Errorf("term %d (leader %s) started after term %d (leader %s): terms must strictly increase", b.term, b.leader, a.term, a.leader)
		case !a.ended:
			return fmt.Errorf("term %d (leader %s) started while term %d (leader %s) had not ended: two leaders at once", b.term, b.leader, a.term, a.leader)
		case b.start.Before(a.stopped()):
			return fmt.Errorf("term %d (leader %s) started %s before term %d (leader %s) ended (its work's context ended with %v): two leaders at once", b.term, b.leader, a.stopped().Sub(b.start), a.term, a.leader, a.cause)
		case a.refused && !errors.Is(a.cause, lease.ErrLost):
			return fmt.Errorf("term %d (leader %s) was still working when term %d started, and its leadership was not lost (its work's context ended with %v): two leaders at once", a.term, a.leader, b.term, a.cause)
		}
	}
	return nil
}

// handoffs describes the gaps between consecutive spans, for the log.
func handoffs(spans []span) string {
	var b strings.Builder
	for i := 1; i < len(spans); i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s→%s %s", spans[i-1].leader, spans[i].leader, spans[i].start.Sub(spans[i-1].stopped()).Round(10*time.Microsecond))
	}
	return b.String()
}

// waitBegun waits until a work of leader has begun, for at most 30s.
func (g *ledger) waitBegun(t testing.TB, leader string) {
	t.Helper()
	limit := time.Now().Add(30 * time.Second)
	for {
		for _, s := range g.snapshot() {
			if s.leader == leader {
				return
			}
		}
		if time.Now().After(limit) {
			t.Fatalf("the work of %s did not begin within 30s of its election", leader)
		}
		time.Sleep(time.Millisecond)
	}
}
