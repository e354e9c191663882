package election

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Current returns the office's current term, read from the store with one
// Inspect: the leader, its term number and metadata, or, when nobody
// leads, a vacant Term (Number zero) and a nil error. Errors are the
// store's (wrapped, never matching lease.ErrNotHeld) or an invalid office
// name (lease.ErrInvalid).
func Current(ctx context.Context, l lease.Locker, office string) (Term, error) {
	if l == nil {
		return Term{}, fmt.Errorf("%w: election: Current with a nil Locker", lease.ErrInvalid)
	}
	if err := driver.CheckName(office); err != nil {
		return Term{}, fmt.Errorf("election: office name: %w", err)
	}
	held, err := l.Inspect(ctx, office)
	switch {
	case errors.Is(err, lease.ErrNotHeld):
		return Term{Office: office}, nil
	case err != nil:
		return Term{}, fmt.Errorf("election: reading office %q: %w", office, err)
	}
	return termOf(held), nil
}

// ObserveOption configures Observe.
type ObserveOption func(*observeConfig)

type observeConfig struct {
	interval time.Duration
	err      error
}

// DefaultPollInterval is the longest an observer goes without reading the
// store unless WithPollInterval says otherwise.
const DefaultPollInterval = time.Second

// firstPoll is how soon an observer reads the store again after it saw
// the office fall vacant (or a store error, or a term past its expiry);
// the wait doubles from there to the poll interval.
const firstPoll = 10 * time.Millisecond

// WithPollInterval sets the longest Observe goes without reading the
// store (DefaultPollInterval otherwise): what a change costs to notice at
// worst when the store does not notify it. d must be at least 1ms; Observe
// reports anything else as an error matching lease.ErrInvalid.
func WithPollInterval(d time.Duration) ObserveOption {
	return func(c *observeConfig) {
		if d < time.Millisecond {
			if c.err == nil {
				c.err = fmt.Errorf("%w: election: WithPollInterval(%s): the interval must be at least 1ms", lease.ErrInvalid, d)
			}
			return
		}
		c.interval = d
	}
}

// Observe follows the office's leadership: it yields the current term
// first (a vacant Term when nobody leads), then every change, until ctx
// ends or the loop breaks. A change is a new term (always with a larger
// Number than any term yielded before: a store read that would take the
// number back is not reported) or the office falling vacant; a leader
// renewing its lease is no change. A term yielded again after a vacancy
// has the same or a larger Number.
//
// When a read fails, Observe yields a vacant Term with the store's error
// and tries again, backing off; the loop may go on or break. Nothing
// outlives the loop: Observe starts no goroutine, and a store watch it
// opens is stopped when the loop ends.
//
// How it learns of changes:
//
//   - When l is a driver.Watcher whose store can watch, the store wakes it
//     when the leader releases the office (and, on stores whose watch
//     says so, when the term expires), and it reads the office at once.
//     In this module the memory and Redis stores notify releases and
//     force-releases, not expiry; etcd notifies expiry too (it deletes
//     the key); the SQL backends do not implement Watch, and are polled.
//   - While a leader holds the office, it reads again when the term is due
//     to expire (by this process's clock, so clock skew between it and the
//     store only moves its reads within the bounds here), and at least
//     every poll interval: a dead leader's expiry is seen within the
//     store's expiry lag, and on a store without notifications a release
//     within the poll interval.
//   - While the office is vacant, or after a store error, or when a term
//     outlives its expiry (the store's expiry lag), it reads after 10ms,
//     doubling to the poll interval, since no store notifies an election:
//     a new leader is seen within 10ms of its election when it comes soon
//     after the vacancy, and within the poll interval at worst.
func Observe(ctx context.Context, l lease.Locker, office string, opts ...ObserveOption) iter.Seq2[Term, error] {
	cfg := observeConfig{interval: DefaultPollInterval}
	for i, o := range opts {
		if o == nil {
			if cfg.err == nil {
				cfg.err = fmt.Errorf("%w: election: Observe option %d is nil", lease.ErrInvalid, i)
			}
			continue
		}
		o(&cfg)
	}
	return func(yield func(Term, error) bool) {
		switch {
		case cfg.err != nil:
			yield(Term{Office: office}, cfg.err)
			return
		case l == nil:
			yield(Term{Office: office}, fmt.Errorf("%w: election: Observe with a nil Locker", lease.ErrInvalid))
			return
		}
		if err := driver.CheckName(office); err != nil {
			yield(Term{Office: office}, fmt.Errorf("election: office name: %w", err))
			return
		}
		o := observer{ctx: ctx, l: l, office: office, interval: cfg.interval}
		o.run(yield)
	}
}

// observer is one Observe loop.
type observer struct {
	ctx      context.Context
	l        lease.Locker
	office   string
	interval time.Duration

	started  bool   // a state was yielded
	vacant   bool   // the last state yielded was a vacancy
	highest  uint64 // the largest term number yielded
	backoff  time.Duration
	changed  <-chan struct{}
	lastSeen uint64 // the term number of the last read, for the backoff
}

func (o *observer) run(yield func(Term, error) bool) {
	// Watch before the first read, so that a release between a read and
	// the wait is not missed.
	if w, ok := o.l.(driver.Watcher); ok && lease.Can[driver.Watcher](o.l) {
		if watch, err := w.Watch(o.ctx, o.office); err == nil {
			defer watch.Stop()
			o.changed = watch.Changed()
		}
	}
	o.backoff = firstPoll
	for o.ctx.Err() == nil {
		t, err := Current(o.ctx, o.l, o.office)
		var wait time.Duration
		switch {
		case err != nil && o.ctx.Err() != nil:
			return
		case err != nil:
			if !yield(Term{Office: o.office}, err) {
				return
			}
			wait = o.slower()
		default:
			if o.report(t) && !yield(t, nil) {
				return
			}
			wait = o.next(t)
		}
		timer := time.NewTimer(wait)
		select {
		case <-o.ctx.Done():
		case <-o.changed:
			o.backoff = firstPoll
		case <-timer.C:
		}
		timer.Stop()
	}
}

// report reports whether t is a change to yield, and records it if so.
func (o *observer) report(t Term) bool {
	switch {
	case !o.started:
	case t.Vacant():
		if o.vacant {
			return false
		}
	case t.Number < o.highest, t.Number == o.highest && !o.vacant:
		return false
	}
	o.started, o.vacant = true, t.Vacant()
	o.highest = max(o.highest, t.Number)
	return true
}

// next is how long to wait before reading again after reading t.
func (o *observer) next(t Term) time.Duration {
	if t.Number != o.lastSeen {
		o.lastSeen, o.backoff = t.Number, firstPoll // a change: look again soon if need be
	}
	if t.Vacant() {
		return o.slower()
	}
	if left := time.Until(t.Expires); left > 0 {
		return min(left+time.Millisecond, o.interval)
	}
	return o.slower() // past its expiry by this clock: expiry lag or skew
}

// slower returns the current backoff and doubles it, up to the interval.
func (o *observer) slower() time.Duration {
	d := min(o.backoff, o.interval)
	o.backoff = min(o.backoff*2, o.interval)
	return d
}
