package etcdlease

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// pool keeps a few etcd leases granted ahead of use, per TTL, so that an
// Acquire of a free name is one transaction instead of a LeaseGrant and
// then a transaction. A pooled lease carries one tenure (see "Which
// tenures share an etcd lease" in the package documentation); the pool
// only moves the grant off the caller's path. During a burst of Acquires
// (a shared grant under way) they do not take spares: a share of the next
// grant serves them better.
//
// A lease waiting in the pool is not kept alive: it was granted (or last
// kept alive) at some moment fresh, so it ends no earlier than fresh+TTL.
// The Acquire that takes it sends a keep-alive for it alongside its
// transaction, so that the tenure ends no earlier than the Acquire's start
// plus the TTL; a lease whose half-TTL has passed is too close to its end
// for that and is revoked instead. A lease that an Acquire took but did
// not use (the name was held) goes back, fresh from that keep-alive.
//
// The pool grows only while Acquires ask for it: a take that finds no
// spare within half a TTL of the previous take starts a refill, and so
// does every pooled lease that a tenure uses up while the class has fewer
// than poolLow spares, so that the spares match the Acquires a Locker
// makes at once. A Release gives its tenure's lease back (recycle), so a
// Locker that acquires and releases stops granting once it has poolLow
// spares. A Locker that acquires seldom grants on demand, as if there
// were no pool, and an idle one holds at most its spares until they go
// stale. A lease that an Acquire took but did not use (the name was held)
// goes back without a refill.
type pool struct {
	s    *store
	ctx  context.Context // the refills' context; cancelled by close
	stop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	classes map[int64]*poolClass // by requested TTL, whole seconds
	wg      sync.WaitGroup       // refills under way
}

// poolClass is the pool of one requested TTL.
type poolClass struct {
	spare     []pooled
	refilling int
	lastTake  time.Time
}

// pooled is an etcd lease that holds no key.
type pooled struct {
	id    clientv3.LeaseID
	ttl   int64     // the TTL etcd granted, in seconds
	fresh time.Time // the lease ends no earlier than fresh+ttl
}

const (
	// poolMax bounds the spare leases of one TTL: about the number of
	// Acquires of that TTL a Locker makes at once.
	poolMax = 64
	// poolLow is the number of spares of one TTL below which a lease
	// that an Acquire uses up is replaced by a grant (see usedUp).
	poolLow = 16
	// poolClasses bounds the TTLs pooled at once; others are granted on
	// demand.
	poolClasses = 16
)

func newPool(s *store) *pool {
	ctx, stop := context.WithCancel(context.Background())
	return &pool{s: s, ctx: ctx, stop: stop, classes: map[int64]*poolClass{}}
}

// usable reports whether p can still back a tenure of its TTL started now:
// less than half its TTL has passed since it was fresh, so the keep-alive
// sent with the Acquire arrives well before it could end.
func (p pooled) usable(now time.Time) bool {
	return now.Before(p.fresh.Add(time.Duration(p.ttl) * time.Second / 2))
}

// take returns a spare lease for a requested TTL of sec seconds, or ok
// false when there is none; then, if the previous take was recent, it
// starts a refill. The caller gives the lease back (give) or reports it
// used up (usedUp).
func (p *pool) take(sec int64, now time.Time) (lease pooled, ok bool) {
	var stale []pooled
	defer func() {
		for _, l := range stale {
			p.s.revokes.revoke(p.ctx, l.id)
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pooled{}, false
	}
	c := p.classes[sec]
	if c == nil {
		if len(p.classes) >= poolClasses {
			return pooled{}, false
		}
		c = &poolClass{}
		p.classes[sec] = c
	}
	recent := !c.lastTake.IsZero() && now.Sub(c.lastTake) < time.Duration(sec)*time.Second/2
	c.lastTake = now
	for len(c.spare) > 0 && !ok {
		last := c.spare[len(c.spare)-1]
		c.spare = c.spare[:len(c.spare)-1]
		if last.usable(now) {
			lease, ok = last, true
		} else {
			stale = append(stale, last)
		}
	}
	if !ok && recent {
		p.startRefill(sec, c)
	}
	return lease, ok
}

// usedUp replaces a lease that take returned and that a tenure now uses,
// or may use (a transaction whose answer was lost), unless the class has
// poolLow spares or more (granted, being granted, or recycled by
// Releases): a Locker whose Releases give leases back grants only to
// cover what is not given back.
func (p *pool) usedUp(sec int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.classes[sec]; c != nil && !p.closed && len(c.spare)+c.refilling < poolLow {
		p.startRefill(sec, c)
	}
}

// recycle puts back the lease of a tenure that a Release ended: etcd
// deleted the tenure's key (the lease's only key: every tenure has a
// lease of its own while it lasts), and l.fresh is when the tenure was
// last acquired or renewed, so the lease lasts until l.fresh+l.ttl at
// least. The lease joins the spares of the class of its granted TTL, if
// that class exists, has room, and the lease is still usable (less than
// half its TTL since fresh), and is revoked otherwise.
func (p *pool) recycle(l pooled) { p.give(l.ttl, l) }

// startRefill grants a lease for c in the background, unless c has its
// fill. p.mu must be held.
func (p *pool) startRefill(sec int64, c *poolClass) {
	if len(c.spare)+c.refilling >= poolMax {
		return
	}
	c.refilling++
	p.wg.Add(1)
	go p.refill(sec, c)
}

// give puts back a lease that take returned and no key was attached to.
func (p *pool) give(sec int64, l pooled) {
	p.mu.Lock()
	c := p.classes[sec]
	if p.closed || c == nil || len(c.spare) >= poolMax || !l.usable(time.Now()) {
		p.mu.Unlock()
		p.s.revokes.revoke(p.ctx, l.id)
		return
	}
	c.spare = append(c.spare, l)
	p.mu.Unlock()
}

// refill grants one lease for c, in the background.
func (p *pool) refill(sec int64, c *poolClass) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, cleanupTimeout)
	defer cancel()
	var g *clientv3.LeaseGrantResponse
	done, err := p.s.write(ctx)
	fresh := time.Now()
	if err == nil {
		g, err = p.s.grantSeconds(ctx, sec)
		done()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c.refilling--
	if err != nil {
		return
	}
	if p.closed || len(c.spare) >= poolMax {
		p.s.revokes.revoke(context.Background(), g.ID)
		return
	}
	c.spare = append(c.spare, pooled{id: g.ID, ttl: g.TTL, fresh: fresh})
}

// close stops the refills and revokes the spare leases (through the
// revoker, which the store closes next).
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	var spare []pooled
	for _, c := range p.classes {
		spare = append(spare, c.spare...)
		c.spare = nil
	}
	p.mu.Unlock()
	p.stop()
	p.wg.Wait()
	for _, l := range spare {
		p.s.revokes.revoke(context.Background(), l.id)
	}
}

// spares returns how many leases wait in the pool.
func (p *pool) spares() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.classes {
		n += len(c.spare)
	}
	return n
}
