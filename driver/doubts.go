package driver

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
)

// doubts remembers the tenures whose Release failed without an answer: the
// store may have applied it, may apply it late (a request that waited in a
// stopped server or a slow network), or never. While such a tenure lives,
// a re-entrant Acquire by its owner would get it back, with its token,
// and a late application of the Release would then end it under a holder
// that trusts the Deadline that Acquire gave. So the Locker's Acquire
// does not re-enter a tenure in doubt: it ends it with a Release of its
// own, whose answer it waits for, and acquires a new tenure, with a new
// token, which the late Release cannot match (see settleDoubt).
//
// An entry lasts until a Release of the tenure gets an answer, or until
// the tenure has surely expired unless re-entered (doubtFor after its
// Deadline); the map holds at most maxDoubts.
type doubts struct {
	n  atomic.Int64 // len(m), read without mu: Acquire's fast path
	mu sync.Mutex
	m  map[doubtKey]time.Time // until when the doubt matters
}

type doubtKey struct {
	name, owner string
	token       uint64
}

const (
	// doubtFor is how long after its Deadline a tenure in doubt is
	// remembered: the store's expiry follows the Deadline by the drift
	// margin and the request's time in flight, far less than this.
	doubtFor = time.Minute
	// maxDoubts bounds the tenures in doubt remembered at once; past it,
	// the one that matters for the shortest time is dropped.
	maxDoubts = 4096
)

func keyOfLease(ls lease.Lease) doubtKey {
	return doubtKey{name: ls.Name, owner: ls.Owner, token: ls.Token}
}

// add records that a Release of ls failed without an answer.
func (d *doubts) add(ls lease.Lease) {
	until := ls.Deadline.Add(doubtFor)
	if ls.Deadline.IsZero() {
		until = time.Now().Add(doubtFor)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[doubtKey]time.Time{}
	}
	if len(d.m) >= maxDoubts {
		now := time.Now()
		var first doubtKey
		var firstUntil time.Time
		for k, u := range d.m {
			if u.Before(now) {
				delete(d.m, k)
			} else if firstUntil.IsZero() || u.Before(firstUntil) {
				first, firstUntil = k, u
			}
		}
		if len(d.m) >= maxDoubts {
			delete(d.m, first)
		}
	}
	d.m[keyOfLease(ls)] = until
	d.n.Store(int64(len(d.m)))
}

// clear forgets the doubt about the tenure k: a Release of it got an
// answer, or it ended.
func (d *doubts) clear(k doubtKey) {
	if d.n.Load() == 0 {
		return
	}
	d.mu.Lock()
	delete(d.m, k)
	d.n.Store(int64(len(d.m)))
	d.mu.Unlock()
}

// has reports whether a Release of the tenure k may still be applied.
func (d *doubts) has(k doubtKey) bool {
	if d.n.Load() == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	until, ok := d.m[k]
	if ok && time.Now().After(until) {
		delete(d.m, k)
		d.n.Store(int64(len(d.m)))
		return false
	}
	return ok
}
