package etcdlease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is how a call gets the etcd lease it puts a tenure on, and
// what it does with it once etcd has answered: each step tells the ledger
// (ledger.go), and disposes of a lease only as the ledger allows.

// unused disposes of a lease that no key was put on: for a lease lent
// to tenures, as the ledger allows; then back to the pool when it is
// fresh from its grant or keep-alive after the call began, else revoked.
func (s *store) unused(ctx context.Context, l tenureLease) {
	if l.lent {
		d := s.ledger.unused(l.id)
		if d.what != reuse {
			s.usedUp(l)
			s.dispose(ctx, d)
			return
		}
	}
	if l.pooled {
		s.revokes.revoke(ctx, l.id)
		s.usedUp(l)
		return
	}
	s.pool.give(l.sec, l.pooledLease)
}

// unanswered records that the transaction that would have put the tenure
// of name and owner on l failed without an answer, so it may still be
// applied: l leaves the pool, and the ledger keeps it from being revoked,
// recycled or kept alive for another tenure (see ledger.unanswered).
func (s *store) unanswered(l tenureLease, name, owner string) {
	s.usedUp(l)
	if l.lent {
		s.ledger.unanswered(l.id, name, owner)
	}
}

// began returns the tenure that a transaction at revision rev put on l
// (a new key: its create revision is rev), and records it in the ledger.
func (s *store) began(ctx context.Context, l tenureLease, name, owner string, rev int64, from time.Time) driver.Tenure {
	t := held(name, owner, rev, from, l.ttl)
	s.dispose(ctx, s.ledger.began(l.id, t, l.ttl, clientv3.NoLease)...)
	return t
}

// dispose carries out what the ledger allowed for leases that no tenure
// uses any more: a revocation, or a return to the pool.
func (s *store) dispose(ctx context.Context, ds ...disposal) {
	for _, d := range ds {
		switch d.what {
		case revoke:
			s.revokes.revoke(ctx, d.id)
		case reuse:
			s.pool.recycle(d.p)
		}
	}
}

// lend records l in the ledger as lent to one write that may put a
// tenure on it.
func (s *store) lend(l *tenureLease) {
	s.ledger.lent(l.id, l.ttl, l.pooledLease.fresh, 1)
	l.lent = true
}

// regrant replaces l, a lease etcd refused as not found before the
// transaction that named it was applied, with one granted now for ttl.
func (s *store) regrant(ctx context.Context, l *tenureLease, ttl time.Duration, start time.Time) error {
	lent := l.lent
	if lent {
		s.ledger.unused(l.id) // gone already: nothing to dispose of
	}
	s.usedUp(*l)
	n, err := s.grantFor(ctx, ttl, start)
	if err != nil {
		return err
	}
	*l = n
	if lent {
		s.lend(l)
	}
	return nil
}

// usedUp tells the pool that a lease it gave is gone from it for good.
func (s *store) usedUp(l tenureLease) {
	if l.fromPool {
		s.pool.usedUp(l.sec)
	}
}

// tenureLease is the etcd lease a call puts a tenure on.
type tenureLease struct {
	pooledLease pooled
	sec         int64 // the requested TTL, whole seconds: the pool's class
	// fromPool says the lease came from the pool, so that using it up
	// starts a refill.
	fromPool bool
	// pooled says the lease came from the pool and has not been kept
	// alive since: the transaction that uses it needs a keep-alive
	// alongside.
	pooled bool
	// group says the lease is shared with the other Acquires of a burst
	// (see grants).
	group bool
	// lent says the ledger counts the lease as lent to this call's write
	// of a tenure (see ledger.lent).
	lent bool
	id   clientv3.LeaseID
	ttl  int64
}

// leaseFor returns a lease for a tenure of ttl that starts at start: one
// from the pool, or one granted now.
func (s *store) leaseFor(ctx context.Context, ttl time.Duration, start time.Time) (tenureLease, error) {
	if l, ok := s.spare(ttlSeconds(ttl), start); ok {
		return l, nil
	}
	return s.grantFor(ctx, ttl, start)
}

// spare returns a lease of the pool's class sec, if it has one (see
// pool.take).
func (s *store) spare(sec int64, start time.Time) (tenureLease, bool) {
	p, ok := s.pool.take(sec, start)
	if !ok {
		return tenureLease{}, false
	}
	return tenureLease{pooledLease: p, sec: sec, fromPool: true, pooled: true, id: p.id, ttl: p.ttl}, true
}

// grantFor grants a lease for a tenure of ttl that starts at start.
func (s *store) grantFor(ctx context.Context, ttl time.Duration, start time.Time) (tenureLease, error) {
	sec := ttlSeconds(ttl)
	g, err := s.grantSeconds(ctx, sec)
	if err != nil {
		return tenureLease{}, fmt.Errorf("grant etcd lease: %w", err)
	}
	return tenureLease{pooledLease: pooled{id: g.ID, ttl: g.TTL, fresh: start}, sec: sec, id: g.ID, ttl: g.TTL}, nil
}
