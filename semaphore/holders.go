package semaphore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Holders returns the current holders of the semaphore name, sorted by
// slot, for operators and tools: one Slot per held slot, with the slot's
// lease as Inspect returns it (no Deadline) and N zero, since the store
// does not record the capacity a holder passed.
//
// When l is a lease.Lister it lists every held slot of name, those above
// n included (holders started under a larger capacity), in one List call
// (see the backend's List for its cost); n may then be 0. Otherwise it
// inspects slots 0 to n-1, one round trip each, and n must be at least 1.
func Holders(ctx context.Context, l lease.Locker, name string, n int) ([]Slot, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: semaphore %q: Holders with a nil Locker", lease.ErrInvalid, name)
	}
	if err := driver.CheckName(name); err != nil {
		return nil, fmt.Errorf("semaphore name: %w", err)
	}
	if n < 0 || n > MaxSlots {
		return nil, fmt.Errorf("%w: semaphore %q: capacity %d: want 0 to %d slots", lease.ErrInvalid, name, n, MaxSlots)
	}
	var out []Slot
	if lister, ok := l.(lease.Lister); ok && lease.Can[lease.Lister](l) {
		leases, err := lister.List(ctx, Prefix+name+"#")
		if err != nil {
			return nil, err
		}
		for _, held := range leases {
			// The prefix also matches the slots of a semaphore whose name
			// continues with '#' ("name#x"): keep only name's own.
			if got, index, ok := ParseSlotName(held.Name); ok && got == name {
				out = append(out, Slot{Name: name, Index: index, Lease: held})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
		return out, nil
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: semaphore %q: this Locker cannot list, so Holders needs the capacity to inspect each slot (got %d)", lease.ErrInvalid, name, n)
	}
	for i := range n {
		held, err := l.Inspect(ctx, SlotName(name, i))
		switch {
		case errors.Is(err, lease.ErrNotHeld):
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, Slot{Name: name, Index: i, Lease: held})
	}
	return out, nil
}
