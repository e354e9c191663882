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
	// groups are the etcd leases that carry (or may carry) several
	// tenures of this Locker (see group); emptied is called, with mu
	// held, for a group's lease once no tenure is on it.
	groups  map[clientv3.LeaseID]*group
	emptied func(clientv3.LeaseID)
	// unanswered are the etcd leases this Locker took for one tenure
	// alone whose transaction failed without an answer, until they could
	// have ended: a tenure found on one later (a retried Acquire
	// re-enters it) is on a lease of its own.
	unanswered map[clientv3.LeaseID]time.Time
}

// group is an etcd lease that the Acquires of a burst share: those that
// needed a lease of one TTL while a grant of that TTL was under way took
// the lease it granted (see grants). A keep-alive of the lease would
// renew every tenure on it, so it is kept alive only by a renewal of all
// of them at once (covers); a renewal of some moves those onto a lease of
// their own, and the rest expire with the group's lease at their own
// time. A group is sealed when its grant is answered: no tenure joins it
// later.
type group struct {
	members map[tenureKey]struct{}
	// pending counts the Acquires that took the lease and whose
	// transaction has not been answered.
	pending int
	// unknown says a transaction that would have put a tenure on the
	// lease failed without an answer: a tenure that no caller holds may
	// be on it, so the lease is never kept alive again.
	unknown bool
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
	// solo says this Locker put the tenure on the lease, which carries no
	// other key: a lease granted or pooled for it alone. A lease the
	// Locker only read may be another Locker's group (see group); a
	// lease of a group of this Locker is in known.groups.
	solo bool
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
	return &known{leases: map[tenureKey]leaseOf{}, sweepAt: knownSweep, busy: map[string]time.Time{}, groups: map[clientv3.LeaseID]*group{}}
}

func keyOf(t driver.Tenure) tenureKey {
	return tenureKey{name: t.Name, owner: t.Owner, token: t.Token}
}

// remember records that t is on the etcd lease id, granted ttl seconds.
func (k *known) remember(t driver.Tenure, id clientv3.LeaseID, ttl int64) {
	k.put(t, id, ttl, false)
}

// rememberSolo records that t is on the etcd lease id, granted ttl
// seconds, which this Locker granted or pooled for t alone.
func (k *known) rememberSolo(t driver.Tenure, id clientv3.LeaseID, ttl int64) {
	k.put(t, id, ttl, true)
}

// put records that t is on the etcd lease id, granted ttl seconds; solo
// as in leaseOf (a lease already known solo stays so).
func (k *known) put(t driver.Tenure, id clientv3.LeaseID, ttl int64, solo bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.leases) >= k.sweepAt {
		// Tenures that expired without a Release are never asked about
		// again (and if they are, etcd says they are lost).
		now := time.Now()
		for key, l := range k.leases {
			if now.After(l.expires) {
				k.drop(key, l)
			}
		}
		k.sweepAt = max(knownSweep, 2*len(k.leases))
	}
	if _, ok := k.unanswered[id]; ok && k.groups[id] == nil {
		solo = true
		delete(k.unanswered, id)
	}
	l := leaseOf{id: id, ttl: ttl, expires: t.Expires, solo: solo}
	old, ok := k.leases[keyOf(t)]
	switch {
	case ok && old.id == id:
		l.inflight, l.tainted = old.inflight, old.tainted
		l.solo = l.solo || old.solo
	case ok:
		k.leave(keyOf(t), old.id) // moved off it
	}
	k.leases[keyOf(t)] = l
}

// drop forgets key, known on l, and takes it out of l's group. k.mu is
// held.
func (k *known) drop(key tenureKey, l leaseOf) {
	delete(k.leases, key)
	k.leave(key, l.id)
}

// leave takes key out of the group of the etcd lease id, if id is one,
// and calls emptied once no tenure is, or may be about to be, on it.
// k.mu is held.
func (k *known) leave(key tenureKey, id clientv3.LeaseID) {
	g := k.groups[id]
	if g == nil {
		return
	}
	delete(g.members, key)
	k.emptyCheck(id, g)
}

func (k *known) emptyCheck(id clientv3.LeaseID, g *group) {
	if len(g.members) == 0 && g.pending == 0 {
		delete(k.groups, id)
		if k.emptied != nil {
			k.emptied(id)
		}
	}
}

// groupStart records that n Acquires took the etcd lease id, just
// granted, as a group.
func (k *known) groupStart(id clientv3.LeaseID, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.groups[id] = &group{members: map[tenureKey]struct{}{}, pending: n}
}

// groupDone records the answer to the transaction of one Acquire that
// took the group lease id: t, when it put the tenure t on the lease (the
// caller remembers t too); nil, when it put nothing (answered) or failed
// without an answer (!answered).
func (k *known) groupDone(id clientv3.LeaseID, t *driver.Tenure, answered bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[id]
	if g == nil {
		return
	}
	g.pending--
	switch {
	case t != nil:
		g.members[keyOf(*t)] = struct{}{}
	case !answered:
		g.unknown = true
	}
	k.emptyCheck(id, g)
}

// inGroup reports whether the etcd lease id is one of this Locker's
// groups.
func (k *known) inGroup(id clientv3.LeaseID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.groups[id] != nil
}

// covers reports whether a keep-alive of the group lease id, sent for
// the tenures keys, renews no other tenure: the group is sealed, no
// tenure of unknown fate may be on it, and each of its tenures is in
// keys.
func (k *known) covers(id clientv3.LeaseID, keys map[tenureKey]bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[id]
	if g == nil || g.pending > 0 || g.unknown {
		return false
	}
	for m := range g.members {
		if !keys[m] {
			return false
		}
	}
	return true
}

// alone reports whether the tenure t is the only one this Locker knows
// on the etcd lease id, and no other can be on it: a lease of its own
// (solo), or a group whose only tenure it is. own is false when the
// Locker knows nothing of the lease: it may be another Locker's group.
func (k *known) alone(t driver.Tenure, id clientv3.LeaseID) (alone, own bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := keyOf(t)
	if g := k.groups[id]; g != nil {
		_, in := g.members[key]
		return in && len(g.members) == 1 && g.pending == 0 && !g.unknown, true
	}
	l, ok := k.leases[key]
	if ok && l.id == id && l.solo {
		return true, true
	}
	if _, ok := k.unanswered[id]; ok {
		return true, true
	}
	return false, false
}

// unansweredMax bounds the leases remembered as unanswered.
const unansweredMax = 1024

// unanswer records that a transaction that would have put one tenure on
// the etcd lease id, taken for it alone, failed without an answer; the
// lease ends by until unless kept alive.
func (k *known) unanswer(id clientv3.LeaseID, until time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.unanswered == nil {
		k.unanswered = map[clientv3.LeaseID]time.Time{}
	}
	if len(k.unanswered) >= unansweredMax {
		now := time.Now()
		for id, u := range k.unanswered {
			if now.After(u) || len(k.unanswered) >= unansweredMax {
				delete(k.unanswered, id)
			}
		}
	}
	k.unanswered[id] = until
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
	if ok {
		k.drop(key, l)
	}
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
	return l, ok && l.solo && l.inflight == 0 && !l.tainted
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

// solo reports whether this Locker put t on the etcd lease id, a lease
// for t alone (see leaseOf).
func (k *known) solo(t driver.Tenure, id clientv3.LeaseID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, ok := k.leases[keyOf(t)]
	return ok && l.id == id && l.solo
}

// take drops what is known of t, which ended, and returns it.
func (k *known) take(t driver.Tenure) (leaseOf, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, ok := k.leases[keyOf(t)]
	if ok {
		k.drop(keyOf(t), l)
	}
	k.settle(t)
	return l, ok
}

// forget drops what is known of t: it ended.
func (k *known) forget(t driver.Tenure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l, ok := k.leases[keyOf(t)]; ok {
		k.drop(keyOf(t), l)
	}
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
