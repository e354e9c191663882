package etcdlease

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// known is what a Locker remembers between calls, to save requests. Every
// fact in it is a hint that the next request checks against etcd; a
// wrong one costs a round trip, never a wrong answer.
type known struct {
	mu      sync.Mutex
	leases  map[tenureKey]leaseOf
	sweepAt int
	busy    map[string]time.Time
	// unsettled are the tenures that a move onto another etcd lease
	// failed without an answer for, until a move of them succeeds (see
	// move); nunsettled is its size, read without mu.
	unsettled  map[tenureKey]time.Time
	nunsettled atomic.Int64
}

// tenureKey identifies a tenure as a Renew or Release names it.
type tenureKey struct {
	name, owner string
	token       uint64
}

// leaseOf is the etcd lease a tenure was last put on or kept alive on by
// this Locker, and the TTL etcd granted it.
type leaseOf struct {
	id      clientv3.LeaseID
	ttl     int64
	expires time.Time // the tenure's Expires then; once past, forgotten
}

const (
	// knownSweep is the size of the lease map below which it is not
	// swept for expired tenures.
	knownSweep = 1024
	// busyMax bounds the names remembered as held by another owner.
	busyMax = 4096
)

func newKnown() *known {
	return &known{leases: map[tenureKey]leaseOf{}, sweepAt: knownSweep, busy: map[string]time.Time{}}
}

func keyOf(t driver.Tenure) tenureKey {
	return tenureKey{name: t.Name, owner: t.Owner, token: t.Token}
}

// remember records that t is on the etcd lease id, granted ttl seconds.
func (k *known) remember(t driver.Tenure, id clientv3.LeaseID, ttl int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.leases) >= k.sweepAt {
		// Tenures that expired without a Release are never asked about
		// again (and if they are, etcd says they are lost).
		now := time.Now()
		for key, l := range k.leases {
			if now.After(l.expires) {
				delete(k.leases, key)
			}
		}
		k.sweepAt = max(knownSweep, 2*len(k.leases))
	}
	k.leases[keyOf(t)] = leaseOf{id: id, ttl: ttl, expires: t.Expires}
}

// lease returns the etcd lease t was last seen on.
func (k *known) lease(t driver.Tenure) (leaseOf, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, ok := k.leases[keyOf(t)]
	return l, ok
}

// forget drops what is known of t: it ended.
func (k *known) forget(t driver.Tenure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.leases, keyOf(t))
	k.settle(t)
}

// unsettledMax bounds the tenures remembered as unsettled; past it, those
// whose Expires has passed are dropped first, then any.
const unsettledMax = 4096

// unsettle records that a move of t failed without an answer: it may
// still be applied, moving t onto a lease kept alive only when it was
// sent. Until a move of t succeeds, renewals of t move it (see move).
func (k *known) unsettle(t driver.Tenure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.unsettled == nil {
		k.unsettled = map[tenureKey]time.Time{}
	}
	if len(k.unsettled) >= unsettledMax {
		now := time.Now()
		for key, exp := range k.unsettled {
			if now.After(exp) {
				delete(k.unsettled, key)
			}
		}
		for key := range k.unsettled {
			if len(k.unsettled) < unsettledMax {
				break
			}
			delete(k.unsettled, key)
		}
	}
	k.unsettled[keyOf(t)] = t.Expires.Add(time.Minute)
	k.nunsettled.Store(int64(len(k.unsettled)))
}

// isUnsettled reports whether a move of t failed without an answer and
// no move of t has succeeded since.
func (k *known) isUnsettled(t driver.Tenure) bool {
	if k.nunsettled.Load() == 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.unsettled[keyOf(t)]
	return ok
}

// settled records that a move of t succeeded (or that t ended). k.mu is
// held.
func (k *known) settle(t driver.Tenure) {
	if k.nunsettled.Load() == 0 {
		return
	}
	delete(k.unsettled, keyOf(t))
	k.nunsettled.Store(int64(len(k.unsettled)))
}

// settled records that a move of t succeeded.
func (k *known) settled(t driver.Tenure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.settle(t)
}

// heldUntil records that another owner holds name, with about d left.
func (k *known) heldUntil(name string, until time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.busy) >= busyMax {
		now := time.Now()
		for n, u := range k.busy {
			if now.After(u) {
				delete(k.busy, n)
			}
		}
		if len(k.busy) >= busyMax {
			return
		}
	}
	k.busy[name] = until
}

// likelyHeld reports whether name was last seen held by another owner
// whose tenure had not run out by now.
func (k *known) likelyHeld(name string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	until, ok := k.busy[name]
	if ok && now.After(until) {
		delete(k.busy, name)
		return false
	}
	return ok
}

// free drops the hint that name is held by another owner.
func (k *known) free(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.busy, name)
}
