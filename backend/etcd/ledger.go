package etcdlease

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ledger is the one place that decides what may happen to the etcd
// leases that carry tenures: whether a keep-alive may go out, whether a
// lease may be revoked or go back to the pool, and whether a tenure found
// on a lease may be adopted (kept alive by keeping its lease alive). The
// rule it keeps is the package documentation's "The lease invariant";
// every path that keeps a tenure's lease alive, revokes it, recycles it
// or adopts it asks here first.
//
// It holds three facts, each either proved by an answer from etcd or
// kept on the safe side of what etcd may do:
//
//   - leases: the etcd leases this Locker handed to its own writes (own
//     leases), with the tenures answered writes put on them and not yet
//     taken off (members), the writes not yet answered (pending), and
//     whether a write that named the lease went unanswered (doubt). A
//     lease that is not here is another Locker's, or forgotten: never
//     revoked, never recycled, kept alive only after etcd has listed its
//     keys (soleOn).
//   - tenures: where this Locker last saw each tenure (its lease, the
//     TTL etcd granted, its Expires), so that Renew can send its
//     keep-alive and its check at once. A hint: the check corrects it.
//   - unsettled: the tenures whose move onto another lease went
//     unanswered, so that their next renewal moves them too (see move).
//
// A record is forgotten only whole, and only after etcd has surely ended
// the lease (its last known end plus forgetAfter, with nothing pending):
// forgetting makes a lease foreign, which only ever stops this Locker
// from revoking or recycling it.
//
// Outside the ledger, and why they need no say from it: the keep-alive
// that an Acquire sends for the pooled lease lent to it, alongside its
// own transaction (the lease carries at most that transaction's tenure);
// the pool's own revocations of spares (a spare is a lease no write has
// named since it was granted, or one the ledger released as reusable:
// nothing is on it); and the leases of waiting marks and of the pass keys
// put on them (keys of waiters, never tenures; see turns.go).
type ledger struct {
	mu      sync.Mutex
	leases  map[clientv3.LeaseID]*leaseRec
	tenures map[tenureKey]seenOn
	sweepAt int

	unsettled  map[tenureKey]time.Time
	nunsettled atomic.Int64 // len(unsettled), read without mu
}

// leaseRec is what the ledger knows of one own lease.
type leaseRec struct {
	ttl int64 // the TTL etcd granted, in seconds
	// members are the tenures that answered writes of this Locker put on
	// the lease and that no answered write or read has shown gone from it.
	members []tenureKey
	// pending counts the writes the lease was handed to whose answer has
	// not come back; shared says it was handed to several (a group).
	pending int
	shared  bool
	// doubt says a write that named the lease went unanswered: it may be
	// applied still, and the lease may carry a tenure that no caller
	// holds. Such a lease is never revoked or recycled, and kept alive
	// only for the tenure that write was for (intended), when it was the
	// lease's only write.
	doubt    bool
	intended tenureKey // name and owner; token unknown (0)
	// inflight counts keep-alives of the lease under way; tainted says
	// one failed without an answer and may still be applied. A lease goes
	// back to the pool only when neither holds.
	inflight int
	tainted  bool
	// until is the latest Expires of a tenure on the lease: etcd ends the
	// lease no earlier, and, unless something kept it alive since, not
	// much later.
	until time.Time
}

// seenOn is where the ledger last saw a tenure.
type seenOn struct {
	id      clientv3.LeaseID
	ttl     int64
	expires time.Time
}

// tenureKey identifies a tenure as a Renew or Release names it.
type tenureKey struct {
	name, owner string
	token       uint64
}

func keyOf(t driver.Tenure) tenureKey {
	return tenureKey{name: t.Name, owner: t.Owner, token: t.Token}
}

const (
	// ledgerSweep is the number of records below which the ledger does
	// not look for records to forget.
	ledgerSweep = 1024
	// forgetAfter is how long past its last known end a record is kept:
	// longer than etcd's expiry lag and a late request's flight.
	forgetAfter = time.Minute
	// unsettledMax bounds the tenures remembered as unsettled.
	unsettledMax = 4096
)

func newLedger() *ledger {
	return &ledger{leases: map[clientv3.LeaseID]*leaseRec{}, tenures: map[tenureKey]seenOn{}, sweepAt: ledgerSweep}
}

// disposal is what may be done with an own lease once a tenure left it
// or a write put nothing on it.
type disposal struct {
	id   clientv3.LeaseID
	what disposalKind
	// p describes the lease for the pool (reuse).
	p pooled
}

type disposalKind int

const (
	// keep: leave the lease alone; it is in use, or it expires by itself.
	keep disposalKind = iota
	// revoke: nothing is on the lease and nothing can be put on it or
	// keep it alive for a tenure any more.
	revoke
	// reuse: as revoke, and no keep-alive of it is under way or may
	// still be applied: it may carry the next tenure.
	reuse
)

// lent records that the own lease id, granted ttl seconds and fresh at
// fresh, is handed to n writes that may each put one tenure on it. Each
// reports its answer with began, unused or unanswered.
func (g *ledger) lent(id clientv3.LeaseID, ttl int64, fresh time.Time, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.leases[id]
	if r == nil {
		r = &leaseRec{ttl: ttl}
		g.leases[id] = r
	}
	r.pending += n
	r.shared = r.shared || n > 1 || len(r.members) > 0
	r.until = later(r.until, fresh.Add(time.Duration(ttl)*time.Second))
	g.maybeSweep()
}

// began records that an answered write put the tenure t on the own lease
// id, one of the writes it was lent to. When t was on another lease
// before (a move from from, or where the ledger saw it), t is taken off
// that one: the disposals say what may be done with those. A lease a
// tenure moved off is never reused, only revoked: another Locker that
// renews the same tenure may still keep it alive.
func (g *ledger) began(id clientv3.LeaseID, t driver.Tenure, ttl int64, from clientv3.LeaseID) []disposal {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := keyOf(t)
	var ds []disposal
	if old, ok := g.tenures[key]; ok && old.id != id && old.id != from {
		ds = g.takeOff(ds, key, old.id, false)
	}
	if from != id && from != clientv3.NoLease {
		ds = g.takeOff(ds, key, from, false)
	}
	r := g.leases[id]
	if r == nil { // forgotten while its write was under way: cannot happen (pending)
		r = &leaseRec{ttl: ttl, doubt: true}
		g.leases[id] = r
	}
	r.pending = max(r.pending-1, 0)
	if !slices.Contains(r.members, key) {
		r.members = append(r.members, key)
	}
	r.until = later(r.until, t.Expires)
	g.see(key, id, ttl, t.Expires)
	g.settle(key)
	return ds
}

// unused records that a write the own lease id was lent to was answered
// and put nothing on it.
func (g *ledger) unused(id clientv3.LeaseID) disposal {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.leases[id]
	if r == nil {
		return disposal{id: id}
	}
	r.pending = max(r.pending-1, 0)
	return g.disposal(id, r)
}

// unanswered records that a write the own lease id was lent to, for the
// tenure of name and owner, failed without an answer: it may still be
// applied.
func (g *ledger) unanswered(id clientv3.LeaseID, name, owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.leases[id]
	if r == nil {
		r = &leaseRec{}
		g.leases[id] = r
	}
	r.pending = max(r.pending-1, 0)
	if r.doubt && (r.intended != tenureKey{name: name, owner: owner}) {
		r.shared = true // two writes in doubt: adopt for neither
	}
	r.doubt, r.intended = true, tenureKey{name: name, owner: owner}
}

// removed records that an answered write deleted the key of the tenure
// t, which was on the lease id: t is on no lease any more. The disposals
// say what may be done with id, and with the lease the ledger saw t on if
// another. reusable is false for a deletion the holder did not ask for
// (ForceRelease): the holder may still be renewing, so the lease is only
// ever revoked.
func (g *ledger) removed(t driver.Tenure, id clientv3.LeaseID, reusable bool) []disposal {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takeOffAll(nil, keyOf(t), id, reusable)
}

// gone records that an answered read or write found the tenure t not
// intact: its key is deleted or belongs to another tenure, so t is on no
// lease any more.
func (g *ledger) gone(t driver.Tenure) []disposal {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takeOffAll(nil, keyOf(t), clientv3.NoLease, false)
}

// takeOffAll takes key off the lease id and off the lease the ledger saw
// it on, and forgets where it was seen. g.mu is held.
func (g *ledger) takeOffAll(ds []disposal, key tenureKey, id clientv3.LeaseID, reusable bool) []disposal {
	if s, ok := g.tenures[key]; ok {
		delete(g.tenures, key)
		if s.id != id {
			ds = g.takeOff(ds, key, s.id, false)
		}
	}
	g.settle(key)
	if id != clientv3.NoLease {
		ds = g.takeOff(ds, key, id, reusable)
	}
	return ds
}

// takeOff takes key off the own lease id, if it is one, and appends to
// ds what may then be done with id, unless that is to keep it; a lease
// that may be reused is revoked instead unless reusable. g.mu is held.
func (g *ledger) takeOff(ds []disposal, key tenureKey, id clientv3.LeaseID, reusable bool) []disposal {
	r := g.leases[id]
	if r == nil {
		return ds
	}
	if i := slices.Index(r.members, key); i >= 0 {
		r.members = slices.Delete(r.members, i, i+1)
	}
	d := g.disposal(id, r)
	if d.what == reuse && !reusable {
		d.what = revoke
	}
	if d.what != keep {
		ds = append(ds, d)
	}
	return ds
}

// disposal is what may be done with the own lease id now. g.mu is held.
func (g *ledger) disposal(id clientv3.LeaseID, r *leaseRec) disposal {
	d := disposal{id: id}
	switch {
	case len(r.members) > 0 || r.pending > 0 || r.doubt:
	case r.shared || r.inflight > 0 || r.tainted:
		d.what = revoke
	default:
		d.what = reuse
		d.p = pooled{id: id, ttl: r.ttl, fresh: r.until.Add(-time.Duration(r.ttl) * time.Second)}
	}
	return d
}

// alone reports whether a keep-alive of the lease id, sent for the
// tenure t, renews t and no other tenure. own is false when id is not an
// own lease: the ledger cannot tell, and the caller asks etcd (soleOn).
func (g *ledger) alone(t driver.Tenure, id clientv3.LeaseID) (alone, own bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.leases[id]
	if r == nil {
		return false, false
	}
	return r.alone(keyOf(t)), true
}

// alone reports whether key is the only tenure r may carry.
func (r *leaseRec) alone(key tenureKey) bool {
	if r.pending > 0 {
		return false
	}
	if r.doubt {
		// Its one write in doubt was for key's name and owner: whatever
		// etcd did with it, the lease carries key at most.
		return !r.shared && r.intended.name == key.name && r.intended.owner == key.owner &&
			(len(r.members) == 0 || len(r.members) == 1 && r.members[0] == key)
	}
	return len(r.members) == 1 && r.members[0] == key
}

// keepAliveStart reports whether a keep-alive of the lease id may go out
// for the tenure t, and counts it as under way until keepAliveDone: on
// an own lease, only while t is the only tenure it may carry (so never
// once t left it: the lease may be back in the pool or carry another
// tenure); on another lease, after soleOn said so. The caller that is
// refused treats t as gone from id.
func (g *ledger) keepAliveStart(t driver.Tenure, id clientv3.LeaseID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.leases[id]
	if r == nil {
		return true
	}
	if !r.alone(keyOf(t)) {
		return false
	}
	r.inflight++
	return true
}

// keepAliveCovers is keepAliveStart for the tenures keys at once: a
// keep-alive of the own lease id may go out when every tenure it may
// carry is in keys (a batch renews them all).
func (g *ledger) keepAliveCovers(id clientv3.LeaseID, keys map[tenureKey]bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.leases[id]
	if r == nil || r.pending > 0 || r.doubt || len(r.members) == 0 {
		return false
	}
	for _, m := range r.members {
		if !keys[m] {
			return false
		}
	}
	r.inflight++
	return true
}

// keepAliveDone ends what keepAliveStart or keepAliveCovers counted;
// answered is false when the keep-alive failed without an answer.
func (g *ledger) keepAliveDone(id clientv3.LeaseID, answered bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.leases[id]; r != nil {
		r.inflight = max(r.inflight-1, 0)
		r.tainted = r.tainted || !answered
	}
}

// kept records that a keep-alive of the lease id, sent for the tenure t
// (found on id by a linearizable read) and answered with a TTL of ttl
// seconds, gave t the Expires it has. On an own lease in doubt whose one
// write in doubt was for t, t is adopted: the lease's only member, and
// the doubt is over.
func (g *ledger) kept(t driver.Tenure, id clientv3.LeaseID, ttl int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := keyOf(t)
	if r := g.leases[id]; r != nil {
		if r.doubt && r.alone(key) {
			// The lease's one write in doubt was for t, and t is on it:
			// that write was applied, and cannot be applied again.
			r.doubt, r.members = false, []tenureKey{key}
		}
		r.until = later(r.until, t.Expires)
	}
	g.see(key, id, ttl, t.Expires)
}

// see records that key is on the lease id, granted ttl seconds, with
// Expires expires; past sweepAt records, it first forgets what etcd has
// surely ended. g.mu is held.
func (g *ledger) see(key tenureKey, id clientv3.LeaseID, ttl int64, expires time.Time) {
	g.maybeSweep()
	g.tenures[key] = seenOn{id: id, ttl: ttl, expires: expires}
}

// maybeSweep sweeps once the ledger holds sweepAt records, and sets the
// next sweep at twice what is left (at least ledgerSweep), so that a
// sweep costs O(1) per record added. g.mu is held.
func (g *ledger) maybeSweep() {
	if len(g.tenures)+len(g.leases) < g.sweepAt {
		return
	}
	g.sweep(time.Now().Add(-forgetAfter))
	g.sweepAt = max(ledgerSweep, 2*(len(g.tenures)+len(g.leases)))
}

// sweep forgets the own leases whose last known end is before by and
// that no write is pending on, whole, and the tenures seen before by.
// g.mu is held.
func (g *ledger) sweep(by time.Time) {
	for id, r := range g.leases {
		if r.pending == 0 && r.inflight == 0 && r.until.Before(by) {
			delete(g.leases, id)
		}
	}
	for key, s := range g.tenures {
		if s.expires.Before(by) {
			delete(g.tenures, key)
		}
	}
}

// lease returns where the tenure t was last seen.
func (g *ledger) lease(t driver.Tenure) (seenOn, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.tenures[keyOf(t)]
	return s, ok
}

// own reports whether id is an own lease.
func (g *ledger) own(id clientv3.LeaseID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leases[id] != nil
}

// unsettle records that a move of t failed without an answer: it may
// still be applied, moving t onto a lease kept alive only when it was
// sent. Until a move of t succeeds, renewals of t move it (see move).
func (g *ledger) unsettle(t driver.Tenure) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unsettled == nil {
		g.unsettled = map[tenureKey]time.Time{}
	}
	if len(g.unsettled) >= unsettledMax {
		now := time.Now()
		for k, u := range g.unsettled {
			if now.After(u) || len(g.unsettled) >= unsettledMax {
				delete(g.unsettled, k)
			}
		}
	}
	g.unsettled[keyOf(t)] = t.Expires.Add(forgetAfter)
	g.nunsettled.Store(int64(len(g.unsettled)))
}

// isUnsettled reports whether a move of t failed without an answer and
// no move of t has succeeded since.
func (g *ledger) isUnsettled(t driver.Tenure) bool {
	if g.nunsettled.Load() == 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.unsettled[keyOf(t)]
	return ok
}

// settle records that a move of the tenure key succeeded, or that it
// ended. g.mu is held.
func (g *ledger) settle(key tenureKey) {
	if g.nunsettled.Load() == 0 {
		return
	}
	delete(g.unsettled, key)
	g.nunsettled.Store(int64(len(g.unsettled)))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
