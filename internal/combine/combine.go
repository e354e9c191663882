// Package combine lets concurrent calls of one kind share requests. The
// Redis backend's pipelines and the SQL backend's shared Acquires, Renews
// and Releases use it.
//
// The invariant, enforced in Queue.Do and nowhere else: a call waits only
// while every lane is taken, and whoever takes a lane sends every call
// then waiting (up to Max) before it lets the lane go. A lane stands for
// what can carry a request (a connection of the pool), so a request is
// never held back while a connection could carry it, and a batch only
// ever merges calls that were already waiting: with a lane free, a call
// that finds nobody else waiting goes alone, at once. Calls merge when
// they arrive together (the one that takes a lane first yields the
// processor once, so that the callers woken with it can queue) or while
// every lane is under way.
package combine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/leasekit/lease/internal/batchctx"
)

// Queue combines calls with requests of type Req and answers of type
// Res. Its zero value is not usable: set Lanes and Max.
type Queue[Req, Res any] struct {
	// Lanes bounds the requests under way at once (at least 1): the
	// connections that can carry them, so that a call never waits while
	// one is free.
	Lanes int
	// Max bounds the calls in one batch (at least 1).
	Max int
	// What names the requests in the error of a call whose context ends
	// while it waits ("requests", "renewals").
	What string
	// Key, when set, keeps calls with the same key out of one batch: a
	// call whose key is already in the batch being taken stays first in
	// line for the next one. For requests that one batch request cannot
	// carry twice, such as two upserts of one row in one statement.
	Key func(Req) string
	// Turns, when set, is the lanes: its capacity bounds the requests
	// under way, and other code may take a turn by sending on it too (the
	// SQL backend's Releases share the Acquires' turns). Lanes is then
	// ignored.
	Turns chan struct{}

	once  sync.Once
	lanes chan struct{}
	mu    sync.Mutex
	queue []*call[Req, Res]
	// waiting is len(queue), read without mu (Waiting).
	waiting atomic.Int32
}

// call is a call waiting to be sent, and its answer.
type call[Req, Res any] struct {
	ctx   context.Context
	req   Req
	taken bool          // in a batch (under Queue.mu)
	done  chan struct{} // closed once res and err are set
	res   Res
	err   error
}

// Do answers req, with alone(ctx, req) when no other call is taken with
// it, or with batch, which some caller runs for req and the other calls
// waiting at that moment (oldest first, at most Max) under a context that
// ends at the latest of their deadlines (batchctx), and which returns an
// answer and an error for each request, in order. Every call queues, then
// waits for its answer or for a lane; the caller that gets a lane sends
// the calls then waiting (see the package documentation). A call whose
// context ends while it waits returns its context's error, wrapped: if no
// batch took it yet it is never sent; otherwise its request may still be
// carried out, as a lone request's may once sent.
func (q *Queue[Req, Res]) Do(ctx context.Context, req Req,
	alone func(context.Context, Req) (Res, error),
	batch func(context.Context, []Req) ([]Res, []error),
) (Res, error) {
	q.once.Do(func() {
		q.lanes = q.Turns
		if q.lanes == nil {
			q.lanes = make(chan struct{}, max(1, q.Lanes))
		}
	})
	c := &call[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	q.mu.Lock()
	q.queue = append(q.queue, c)
	q.waiting.Store(int32(len(q.queue)))
	q.mu.Unlock()
	lane := q.lanes
	select {
	case lane <- struct{}{}:
		q.send(alone, batch)
		if q.sent(c) {
			lane = nil // answered, or in another caller's batch under way
		}
	default:
	}
	for {
		select {
		case <-c.done:
			return c.res, c.err
		case lane <- struct{}{}:
			q.send(nil, batch)
			if q.sent(c) {
				lane = nil // in a batch under way: wait for its answer only
			}
		case <-ctx.Done():
			var zero Res
			if q.leave(c) {
				return zero, fmt.Errorf("waiting for one of the %d %s under way to finish: %w", cap(q.lanes), q.What, ctx.Err())
			}
			return zero, ctx.Err() // sent in a batch: its outcome is unknown
		}
	}
}

// send, on a lane the caller took, takes the waiting calls and sends
// them, then gives the lane back. It first lets the callers that the last
// answers woke queue their next calls: they join this batch instead of
// taking lanes of their own. A lone call goes with alone when it is not
// nil (a call that found a lane free at once), else with batch, as calls
// that waited always do.
func (q *Queue[Req, Res]) send(alone func(context.Context, Req) (Res, error), batch func(context.Context, []Req) ([]Res, []error)) {
	defer func() { <-q.lanes }()
	runtime.Gosched()
	if cs := q.take(); len(cs) > 0 {
		run(cs, alone, batch)
	}
}

// run sends cs, a lone call with alone (when not nil) under its own
// context and more with batch, and answers each call.
func run[Req, Res any](cs []*call[Req, Res], alone func(context.Context, Req) (Res, error), batch func(context.Context, []Req) ([]Res, []error)) {
	if len(cs) == 1 && alone != nil {
		c := cs[0]
		c.res, c.err = alone(c.ctx, c.req)
		close(c.done)
		return
	}
	ctxs := make([]context.Context, len(cs))
	reqs := make([]Req, len(cs))
	for i, c := range cs {
		ctxs[i], reqs[i] = c.ctx, c.req
	}
	ctx, cancel := batchctx.New(context.Background(), ctxs)
	defer cancel()
	res, errs := batch(ctx, reqs)
	for i, c := range cs {
		switch {
		case i < len(errs) && errs[i] != nil:
			c.err = errs[i]
		case i < len(res):
			c.res = res[i]
		default:
			c.err = fmt.Errorf("lease/internal/combine: the batch gave %d answers for %d requests", len(res), len(cs))
		}
		close(c.done)
	}
}

// take removes and returns the waiting calls, up to Max, oldest first,
// and with Key set no two of one key.
func (q *Queue[Req, Res]) take() []*call[Req, Res] {
	q.mu.Lock()
	defer q.mu.Unlock()
	limit := max(1, q.Max)
	var seen map[string]bool
	if q.Key != nil {
		seen = make(map[string]bool)
	}
	var cs []*call[Req, Res]
	rest := q.queue[:0]
	for _, c := range q.queue {
		if len(cs) < limit {
			if seen == nil {
				cs = append(cs, c)
				continue
			}
			if k := q.Key(c.req); !seen[k] {
				seen[k] = true
				cs = append(cs, c)
				continue
			}
		}
		rest = append(rest, c)
	}
	for _, c := range cs {
		c.taken = true
	}
	clear(q.queue[len(rest):])
	q.queue = rest
	q.waiting.Store(int32(len(rest)))
	return cs
}

// sent reports whether a batch took c.
func (q *Queue[Req, Res]) sent(c *call[Req, Res]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return c.taken
}

// leave removes c from the queue unless a batch took it; it reports
// whether it did.
func (q *Queue[Req, Res]) leave(c *call[Req, Res]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.taken {
		return false
	}
	if i := slices.Index(q.queue, c); i >= 0 {
		q.queue = slices.Delete(q.queue, i, i+1)
		q.waiting.Store(int32(len(q.queue)))
	}
	return true
}

// Waiting returns how many calls wait for a batch.
func (q *Queue[Req, Res]) Waiting() int { return int(q.waiting.Load()) }
