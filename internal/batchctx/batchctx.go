// Package batchctx gives a request that several calls share one context:
// it ends when every call's context has ended, at the latest of their
// deadlines, or with the owner's life, and keeps the first call's values.
// The etcd backend's shared reads, writes and grants and the SQL
// backend's shared takeover statements use it.
package batchctx

import (
	"context"
	"sync"
	"time"
)

// New returns the context of a request shared by calls with the contexts
// ctxs (at least one): it ends with life, at the latest of their
// deadlines (none if one has none), or once every one of them has ended.
// It keeps the values of ctxs[0]. The caller calls the CancelFunc once
// the request is over.
func New(life context.Context, ctxs []context.Context) (context.Context, context.CancelFunc) {
	var latest time.Time
	bounded := true
	for _, c := range ctxs {
		d, ok := c.Deadline()
		if !ok {
			bounded = false
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithCancel(life)
	if bounded {
		ctx, cancel = context.WithDeadline(life, latest)
	}
	// Values (tracing) from the first call; cancellation from none of
	// them alone.
	ctx = valuesFrom{Context: ctx, values: ctxs[0]}
	left := len(ctxs)
	var mu sync.Mutex
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// valuesFrom is a context whose values come from another one.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (c valuesFrom) Value(key any) any { return c.values.Value(key) }
