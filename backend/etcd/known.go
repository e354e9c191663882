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
	// ended are the tenures this Locker released, until a minute past
	// their Expires: no keep-alive may go out for them any more, since
	// their etcd lease may be back in the pool, or carry another tenure
	// (see released).
	ended map[tenureKey]time.Time
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
	// inflight counts this Locker's keep-alives of the lease for the
	// tenure under way (keepAliveStart to keepAliveDone); tainted says
	// one of them failed without an answer, so it may still be applied.
	// A Release recycles the lease only when neither holds.
	inflight int
	tainted  bool
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
	l := leaseOf{id: id, ttl: ttl, expires: t.Expires}
	if old, ok := k.leases[keyOf(t)]; ok && old.id == id {
		l.inflight, l.tainted = old.inflight, old.tainted
	}
	k.leases[keyOf(t)] = l
}

// keepAliveStart reports whether a keep-alive of the etcd lease id may go
// out for the tenure t, and counts it as under way until keepAliveDone.
// It may not once this Locker has released t: the lease may be back in
// the pool, or carry another tenure, which the keep-alive would keep
// alive past its own ttl. The caller then treats t as ended.
func (k *known) keepAliveStart(t driver.Tenure, id clientv3.LeaseID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := keyOf(t)
	if l, ok := k.leases[key]; ok {
		if l.id == id {
			l.inflight++
			k.leases[key] = l
		}
		return true
	}
	_, ended := k.ended[key]
	return !ended
}

// keepAliveDone ends what keepAliveStart(t, id) counted; answered is
// false when the keep-alive failed without an answer.
func (k *known) keepAliveDone(t driver.Tenure, id clientv3.LeaseID, answered bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := keyOf(t)
	if l, ok := k.leases[key]; ok && l.id == id {
		l.inflight--
		l.tainted = l.tainted || !answered
		k.leases[key] = l
	}
}

// endedMax bounds the tenures remembered as released.
const endedMax = 4096

// released drops what is known of t, which a Release ended (or found
// ended), and remembers it as ended. l is the lease t was known on;
// recyclable says that no keep-alive of it for t is under way or may
// still be applied, so that once etcd has deleted t's key the lease holds
// nothing and nothing of this Locker can keep it alive for t again.
func (k *known) released(t driver.Tenure) (l leaseOf, recyclable bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := keyOf(t)
	l, ok := k.leases[key]
	delete(k.leases, key)
	k.settle(t)
	if k.ended == nil {
		k.ended = map[tenureKey]time.Time{}
	}
	// A full map drops half its entries, so that a Locker releasing
	// thousands of tenures at once sweeps it once per endedMax/2 Releases.
	// An entry matters while a call that read the tenure before its
	// Release may still send a keep-alive for it: milliseconds, unless
	// the read was held up.
	boundedPut(k.ended, key, t.Expires.Add(time.Minute), endedMax, endedMax/2)
	return l, ok && l.inflight == 0 && !l.tainted
}

// boundedPut sets m[key] = until. When m has max entries, it first drops
// the entries whose time has passed, then arbitrary ones until keep are
// left.
func boundedPut(m map[tenureKey]time.Time, key tenureKey, until time.Time, max, keep int) {
	if len(m) >= max {
		now := time.Now()
		for k, u := range m {
			if now.After(u) {
				delete(m, k)
			}
		}
		for k := range m {
			if len(m) <= keep {
				break
			}
			delete(m, k)
		}
	}
	m[key] = until
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
	boundedPut(k.unsettled, keyOf(t), t.Expires.Add(time.Minute), unsettledMax, unsettledMax-1)
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
