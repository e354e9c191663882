// Package combine lets concurrent calls of one kind share requests: while
// a few requests are under way, later calls wait, and the next call to
// get a turn sends every waiting call in one batch request. A call that
// finds a turn free and nobody waiting sends its own request at once, so
// a call never waits for company. The Redis backend's pipelines and the
// SQL backend's shared Acquires, Renews and Releases use it.
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
	// Lanes bounds the requests under way at once (at least 1).
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
	// waiting is len(queue), read without mu: a call that finds others
	// waiting joins them rather than overtaking them.
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

// Do answers req: with alone(ctx, req) when a lane is free and nobody
// waits, otherwise with batch, which some caller runs for req and the
// other waiting calls (oldest first, at most Max) under a context that
// ends at the latest of their deadlines (batchctx), and which returns an
// answer and an error for each request, in order. A call whose context
// ends while it waits returns its context's error, wrapped: if no batch
// took it yet it is never sent; otherwise its request may still be
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
	if q.waiting.Load() == 0 {
		select {
		case q.lanes <- struct{}{}:
			defer func() { <-q.lanes }()
			return alone(ctx, req)
		default:
		}
	}
	c := &call[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	q.mu.Lock()
	q.queue = append(q.queue, c)
	q.waiting.Store(int32(len(q.queue)))
	q.mu.Unlock()
	lane := q.lanes
	for {
		select {
		case <-c.done:
			return c.res, c.err
		case lane <- struct{}{}:
			// Let the callers that the last answers woke queue their
			// next calls first: they join this batch instead of waiting
			// for the next one.
			runtime.Gosched()
			if cs := q.take(); len(cs) > 0 {
				run(cs, batch)
			}
			<-q.lanes
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

// run sends cs with batch and answers each call.
func run[Req, Res any](cs []*call[Req, Res], batch func(context.Context, []Req) ([]Res, []error)) {
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
