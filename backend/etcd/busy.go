package etcdlease

import (
	"sync"
	"time"
)

// busyNames remembers the names this Locker found held by another owner,
// and until when, so that the next Acquire of such a name reads before it
// writes. A hint only: a wrong one costs a round trip (the read finds the
// name free and the Acquire writes), never a wrong answer.
type busyNames struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// busyMax bounds the names remembered as held by another owner.
const busyMax = 4096

// heldUntil records that another owner holds name until about until.
func (b *busyNames) heldUntil(name string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]time.Time{}
	}
	if len(b.m) >= busyMax {
		now := time.Now()
		for n, u := range b.m {
			if now.After(u) {
				delete(b.m, n)
			}
		}
		if len(b.m) >= busyMax {
			return
		}
	}
	b.m[name] = until
}

// likelyHeld reports whether name was last seen held by another owner
// whose tenure had not run out by now.
func (b *busyNames) likelyHeld(name string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.m[name]
	if ok && now.After(until) {
		delete(b.m, name)
		return false
	}
	return ok
}

// free drops the hint that name is held by another owner.
func (b *busyNames) free(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, name)
}
