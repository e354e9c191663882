package semaphoretest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/semaphore"
)

// ledger records the holders of one semaphore: each holder's interval,
// from when its work started (after the grant) to when its work ended or
// its slot's Deadline, whichever came first.
type ledger struct {
	mu    sync.Mutex
	spans []span
}

// span is one holder's interval.
type span struct {
	who        string
	n          int // the capacity it acquired under
	slot       int
	token      uint64
	start, end time.Time
	ended      bool
}

// work returns a semaphore.Run fn that records its interval, calls hold
// (which returns when the holder should end, or when its ctx ends), and
// returns nil.
func (g *ledger) work(who string, hold func(ctx context.Context, s semaphore.Slot)) func(ctx context.Context, s semaphore.Slot) error {
	return func(ctx context.Context, s semaphore.Slot) error {
		i := g.begin(who, s)
		hold(ctx, s)
		g.end(i, ctx)
		return nil
	}
}

func (g *ledger) begin(who string, s semaphore.Slot) int {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.spans = append(g.spans, span{who: who, n: s.N, slot: s.Index, token: s.Lease.Token, start: now})
	return len(g.spans) - 1
}

// end closes span i at now, or at the slot's latest Deadline if that
// passed first: a holder past its Deadline holds nothing.
func (g *ledger) end(i int, ctx context.Context) {
	now := time.Now()
	if held, ok := lease.FromContext(ctx); ok && !held.Deadline.IsZero() && held.Deadline.Before(now) {
		now = held.Deadline
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.spans[i].end, g.spans[i].ended = now, true
}

func (g *ledger) snapshot() []span {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]span(nil), g.spans...)
}

// check fails t when more than limit spans overlap at any moment, when
// two spans of one slot overlap, when a slot's tokens do not strictly
// increase in the order of its grants, or when a span's slot is outside
// the capacity it acquired under. It returns the spans, by start.
func (g *ledger) check(t testing.TB, limit int) []span {
	t.Helper()
	spans := g.snapshot()
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for _, sp := range spans {
		if !sp.ended {
			t.Errorf("%s's work on slot %d (token %d) never ended", sp.who, sp.slot, sp.token)
		}
		if sp.slot < 0 || sp.slot >= sp.n {
			t.Errorf("%s holds slot %d, outside the capacity %d it acquired under", sp.who, sp.slot, sp.n)
		}
	}
	if most, at := maxOverlap(spans); most > limit {
		t.Errorf("%d holders at once at %s (at most %d allowed):\n%s", most, at.Format("15:04:05.000000"), limit, describe(spans))
	}
	last := map[int]span{}
	for _, sp := range spans {
		prev, ok := last[sp.slot]
		if ok && sp.start.Before(prev.end) {
			t.Errorf("slot %d held twice at once: %s (token %d) until %s, %s (token %d) from %s",
				sp.slot, prev.who, prev.token, prev.end.Format("15:04:05.000000"), sp.who, sp.token, sp.start.Format("15:04:05.000000"))
		}
		if ok && sp.token <= prev.token {
			t.Errorf("slot %d: token %d (%s) after token %d (%s): tokens must strictly increase per slot", sp.slot, sp.token, sp.who, prev.token, prev.who)
		}
		if !ok || sp.end.After(prev.end) {
			last[sp.slot] = sp
		} else {
			last[sp.slot] = span{who: sp.who, slot: sp.slot, token: sp.token, start: sp.start, end: prev.end}
		}
	}
	return spans
}

// maxOverlap returns the largest number of spans open at one moment, and
// the moment.
func maxOverlap(spans []span) (int, time.Time) {
	type edge struct {
		at   time.Time
		open int
	}
	var edges []edge
	for _, sp := range spans {
		end := sp.end
		if !sp.ended {
			end = time.Now()
		}
		edges = append(edges, edge{sp.start, 1}, edge{end, -1})
	}
	// Ends before starts at the same moment: touching is not overlapping.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].open < edges[j].open
		}
		return edges[i].at.Before(edges[j].at)
	})
	most, cur := 0, 0
	var at time.Time
	for _, e := range edges {
		cur += e.open
		if cur > most {
			most, at = cur, e.at
		}
	}
	return most, at
}

func describe(spans []span) string {
	var out string
	for _, sp := range spans {
		out += fmt.Sprintf("  %s: slot %d of %d, token %d, %s to %s\n", sp.who, sp.slot, sp.n, sp.token,
			sp.start.Format("15:04:05.000000"), sp.end.Format("15:04:05.000000"))
	}
	return out
}
