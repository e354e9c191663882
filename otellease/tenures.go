package otellease

import (
	"context"
	"sync"
	"time"
)

// The tenures the wrapper follows, for lease.held, lease.hold.duration and
// lease.losses: those an Acquire through the wrapper granted, until they
// end. See "Losses and what the wrapper cannot see" in the package
// documentation for the rules this file implements.

// tenureKey identifies a tenure: tokens never repeat within a name.
type tenureKey struct {
	name  string
	token uint64
}

type tenure struct {
	acquired time.Time // when the Acquire that began it answered
	deadline time.Time // the Deadline of the latest grant or renewal
}

// minSweep is the size of the table at which an Acquire first sweeps out
// tenures whose Deadline passed unnoticed (when no collection does).
const minSweep = 1024

type tenures struct {
	mu      sync.Mutex
	m       map[tenureKey]tenure
	sweepAt int
}

// event is what a call said about a tenure.
type event uint8

const (
	evGranted       event = iota // Acquire granted it (new or re-entered)
	evRenewed                    // Renew extended it
	evRenewFailed                // Renew failed without an answer (store error, closed, ...)
	evLost                       // Renew or Release answered ErrLost
	evReleased                   // Release ended it
	evReleaseFailed              // Release failed without an answer
)

// ending is what the end of a tenure records, once the table is unlocked.
type ending struct {
	end   holdEnd
	held  time.Duration
	cause cause
	loss  bool
}

// tracking reports whether anything that the table feeds records: when
// nothing does (no-op providers), the wrapper skips the table.
func (c *core) tracking(ctx context.Context) bool {
	return c.observed.Load() || c.inst.hold.Enabled(ctx) || c.inst.losses.Enabled(ctx)
}

// settle applies to the tenure k what a call that began at start and was
// answered at end said about it (ev; deadline is the new Deadline for
// evGranted and evRenewed), and records the end of a tenure it finds.
// lost is the cause an evLost has when the Deadline had not passed.
func (c *core) settle(ctx context.Context, k tenureKey, ev event, deadline, start, end time.Time, lost cause) {
	if !c.tracking(ctx) {
		return
	}
	var buf [2]ending
	ends := buf[:0]
	t := &c.tenures
	t.mu.Lock()
	cur, ok := t.m[k]
	// The Deadline passed before this call began, or before the renewal
	// it made landed: the tenure was lost then, whatever the answer.
	if ok && (!start.Before(cur.deadline) || ((ev == evGranted || ev == evRenewed) && !end.Before(cur.deadline))) {
		delete(t.m, k)
		ok = false
		ends = append(ends, ending{end: endLost, held: cur.deadline.Sub(cur.acquired), cause: causeDeadline, loss: true})
	}
	switch ev {
	case evGranted:
		if ok {
			cur.deadline = deadline
			t.m[k] = cur
			break
		}
		if t.m == nil {
			t.m = map[tenureKey]tenure{}
		}
		t.m[k] = tenure{acquired: end, deadline: deadline}
		if len(t.m) >= max(t.sweepAt, minSweep) {
			// Nobody collects: end the tenures left to expire here, so
			// that the table stays as small as the tenures held.
			ends = append(ends, t.sweepLocked(end)...)
			t.sweepAt = 2 * len(t.m)
		}
	case evRenewed:
		if ok {
			cur.deadline = deadline
			t.m[k] = cur
		}
	case evLost:
		if ok {
			delete(t.m, k)
			ends = append(ends, ending{end: endLost, held: minTime(end, cur.deadline).Sub(cur.acquired), cause: lost, loss: true})
		}
	case evReleased:
		if ok {
			delete(t.m, k)
			ends = append(ends, ending{end: endReleased, held: end.Sub(cur.acquired)})
		}
	case evReleaseFailed:
		if ok {
			delete(t.m, k)
			ends = append(ends, ending{end: endFailed, held: minTime(end, cur.deadline).Sub(cur.acquired)})
		}
	case evRenewFailed:
		// The tenure goes on until its Deadline; the holder may retry.
	}
	t.mu.Unlock()
	for _, e := range ends {
		c.record(ctx, e)
	}
}

// sweepLocked ends every tenure whose Deadline is not after now, as lost
// by deadline. t.mu must be held.
func (t *tenures) sweepLocked(now time.Time) []ending {
	var out []ending
	for k, cur := range t.m {
		if !now.Before(cur.deadline) {
			delete(t.m, k)
			out = append(out, ending{end: endLost, held: cur.deadline.Sub(cur.acquired), cause: causeDeadline, loss: true})
		}
	}
	return out
}

// observe is the lease.held callback: it ends the tenures whose Deadline
// has passed and counts the others.
func (c *core) observe(ctx context.Context) int64 {
	c.observed.Store(true)
	t := &c.tenures
	t.mu.Lock()
	ends := t.sweepLocked(time.Now())
	n := len(t.m)
	t.mu.Unlock()
	for _, e := range ends {
		c.record(ctx, e)
	}
	return int64(n)
}

func (c *core) record(ctx context.Context, e ending) {
	c.inst.hold.Record(ctx, max(e.held, 0).Seconds(), c.inst.holdOpts[e.end]...)
	if e.loss {
		c.inst.losses.Add(ctx, 1, c.inst.lossOpts[e.cause]...)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
