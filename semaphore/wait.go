package semaphore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// watchFallback is how long a waiter that watches the slots waits at
// most between scans: what a lost notification can cost.
const watchFallback = 2 * time.Second

// A polling waiter's backoff runs from pollMin, doubling, to pollMax,
// with full jitter.
const (
	pollMin = 10 * time.Millisecond
	pollMax = time.Second
)

// acquireWaiting scans the slots below n with fn until a try succeeds or
// fails with a store error, waiting up to wait while every slot is held
// (see the package documentation for how it wakes and what it costs).
// When wait runs out it returns the last *FullError.
func acquireWaiting(ctx context.Context, l lease.Locker, name string, n int, wait time.Duration, fn try) error {
	limit := time.Now().Add(wait)
	first := -1
	backoff := pollMin
	var watches *slotWatches
	defer func() { watches.stop() }()
	tried := false // to watch
	for {
		full, err := scan(ctx, name, n, first, fn)
		switch {
		case err != nil:
			return err
		case full == nil:
			return nil
		}
		left := time.Until(limit)
		if left <= 0 {
			return full
		}
		if !tried {
			// Watch once the semaphore is found full, then scan again: a
			// slot released before its watch was in place would be missed.
			tried = true
			if watches, err = watchSlots(ctx, l, name, n); err != nil {
				return fmt.Errorf("semaphore %q: gave up waiting: %w; last attempt: %w", name, err, full)
			}
			if watches != nil {
				first = -1
				continue
			}
		}
		expiry := full.Remaining + time.Millisecond // the soonest holder's end
		d := min(watchFallback, left)
		if watches == nil {
			d = min(time.Duration(rand.Int64N(int64(backoff)))+time.Millisecond, left)
			backoff = min(backoff*2, pollMax)
		}
		byExpiry := expiry <= d
		d = min(d, expiry)
		woke, err := watches.wait(ctx, d)
		if err != nil {
			return fmt.Errorf("semaphore %q: gave up waiting: %w; last attempt: %w", name, err, full)
		}
		first = woke
		if first < 0 && byExpiry {
			first = full.Soonest // its holder's tenure is due to end: try it first
		}
	}
}

// slotWatches are a waiter's watches, one per slot; nil when the Locker
// cannot watch.
type slotWatches struct {
	watches []driver.Watch
	cases   []reflect.SelectCase // ctx.Done, the timer, then one per slot
}

// watchSlots watches slots 0 to n-1 of name when l is a driver.Watcher
// whose store can watch; it returns nil, nil when it cannot (the waiter
// polls), and the cause when ctx ended.
func watchSlots(ctx context.Context, l lease.Locker, name string, n int) (*slotWatches, error) {
	w, ok := l.(driver.Watcher)
	ok = ok && lease.Can[driver.Watcher](l)
	if !ok {
		return nil, nil
	}
	s := &slotWatches{cases: make([]reflect.SelectCase, 2, n+2)}
	s.cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	for i := range n {
		watch, err := w.Watch(ctx, slotName(name, n, i))
		if err != nil {
			s.stop()
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			// errors.ErrUnsupported, or a store that cannot watch now:
			// poll, which is slower but still correct.
			return nil, nil
		}
		s.watches = append(s.watches, watch)
		s.cases = append(s.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(watch.Changed())})
	}
	return s, nil
}

// wait waits d, or until a slot's watch fires, whose index it returns
// (-1 when d passed), or until ctx ends (its cause). On a nil
// *slotWatches it only sleeps.
func (s *slotWatches) wait(ctx context.Context, d time.Duration) (int, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	if s == nil {
		select {
		case <-ctx.Done():
			return -1, context.Cause(ctx)
		case <-t.C:
			return -1, nil
		}
	}
	s.cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)}
	chosen, _, _ := reflect.Select(s.cases)
	switch chosen {
	case 0:
		return -1, context.Cause(ctx)
	case 1:
		return -1, nil
	}
	return chosen - 2, nil
}

// stop stops every watch; safe on nil.
func (s *slotWatches) stop() {
	if s == nil {
		return
	}
	for _, w := range s.watches {
		w.Stop()
	}
	s.watches = nil
}
