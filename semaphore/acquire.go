package semaphore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Slot is one holder's place in a semaphore.
type Slot struct {
	// Name is the semaphore's name, as given to Acquire or Run.
	Name string
	// Index is the slot's number, from 0 to N-1.
	Index int
	// N is the capacity the slot was acquired under (zero in a Slot
	// returned by Holders: the store does not record it).
	N int
	// Lease is the slot's tenure: Lease.Name is SlotName(Name, Index),
	// and Lease.Token is the slot's fencing token, strictly greater than
	// every earlier token of this slot (not of the other slots). Renew and
	// Release it with the Locker, as any lease. Inside Run it is the
	// lease as granted; lease.FromContext on the work's context gives it
	// as of its latest renewal.
	Lease lease.Lease
}

// FullError reports that every slot a caller may take is held. It
// matches lease.ErrHeld with errors.Is; get it with errors.As for the
// details.
type FullError struct {
	// Name is the semaphore's name and N the capacity the caller passed.
	Name string
	N    int
	// Remaining is how long the slot that frees first has left, by the
	// store's clock, as the stores answered: how long a crashed holder can
	// keep the caller waiting, at most.
	Remaining time.Duration
	// Soonest is that slot's index.
	Soonest int
}

// Error says the semaphore is full and when a slot frees at the latest.
func (e *FullError) Error() string {
	return fmt.Sprintf("semaphore: all %d slots of %q are held; the first ends in at most %s", e.N, e.Name, e.Remaining.Round(time.Millisecond))
}

// Is makes errors.Is(err, lease.ErrHeld) true for a *FullError.
func (e *FullError) Is(target error) bool { return target == lease.ErrHeld }

// Acquire takes one free slot of the semaphore name of capacity n for
// owner, for ttl, without waiting: it tries the slots below n one at a
// time in a random order, and returns the first it gets (see the package
// documentation for the cost). When every slot is held it returns a
// *FullError, which matches lease.ErrHeld. A store error is returned as
// it is, wrapped, and is never reported as full.
//
// The caller holds the slot as any lease: renew Slot.Lease with the
// Locker before its Deadline, and release it when done; or use Run,
// which does both. Acquire is re-entrant as the Locker's Acquire is: an
// owner that holds a slot of name below n may be given that slot again,
// with the same token, if the random order reaches it before a free one.
//
// A bad name, capacity, owner or ttl is an error matching
// lease.ErrInvalid that names the problem; nothing reaches the store.
func Acquire(ctx context.Context, l lease.Locker, name string, n int, owner string, ttl time.Duration) (Slot, error) {
	if err := check(name, n, ttl); err != nil {
		return Slot{}, err
	}
	if l == nil {
		return Slot{}, fmt.Errorf("%w: semaphore %q: Acquire with a nil Locker", lease.ErrInvalid, name)
	}
	if err := driver.CheckOwner(owner); err != nil {
		return Slot{}, fmt.Errorf("semaphore %q: %w", name, err)
	}
	var got Slot
	full, err := scan(ctx, name, n, -1, func(ctx context.Context, slot string, index int) error {
		held, err := l.Acquire(ctx, slot, owner, ttl)
		if err == nil {
			got = Slot{Name: name, Index: index, N: n, Lease: held}
		}
		return err
	})
	switch {
	case err != nil:
		return Slot{}, err
	case full != nil:
		return Slot{}, full
	}
	return got, nil
}

// try asks for one slot, named slot, of index: nil when it got it (and
// is done with it, for Run), an error matching lease.ErrHeld when another
// owner holds it, any other error to stop.
type try func(ctx context.Context, slot string, index int) error

// scan tries the slots below n, first the slot first (when it is not
// negative), then the others in a random order, until one try succeeds
// (nil, nil) or fails with anything but ErrHeld (nil, err). When every
// slot is held it returns a *FullError.
//
// The order is a fresh random permutation for every scan, not a random
// start going round: holders that went round from random starts would
// leave runs of held slots next to each other, and a start inside a run
// would try the whole run (linear probing's clustering: 2.5 tries on
// average at half full instead of 2). The permutation is drawn lazily, so
// a first try that succeeds costs no allocation.
func scan(ctx context.Context, name string, n, first int, fn try) (*FullError, error) {
	full := &FullError{Name: name, N: n, Soonest: -1}
	var (
		order  []int // the slots not tried yet, once the first try failed
		tried0 int   // the first try's slot
	)
	for k := 0; k < n; k++ {
		var index int
		switch {
		case k == 0 && first >= 0:
			index, tried0 = first, first
		case k == 0:
			index = rand.IntN(n)
			tried0 = index
		default:
			if order == nil {
				order = make([]int, 0, n-1)
				for i := range n {
					if i != tried0 {
						order = append(order, i)
					}
				}
			}
			// Fisher-Yates, one draw at a time.
			j := rand.IntN(len(order))
			index = order[j]
			order[j] = order[len(order)-1]
			order = order[:len(order)-1]
		}
		err := fn(ctx, slotName(name, n, index), index)
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, lease.ErrHeld) {
			return nil, err
		}
		remaining := time.Duration(0)
		if he, ok := errors.AsType[*lease.HeldError](err); ok {
			remaining = he.Remaining
		}
		if full.Soonest < 0 || remaining < full.Remaining {
			full.Soonest, full.Remaining = index, remaining
		}
	}
	return full, nil
}
