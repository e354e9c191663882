package etcdlease

import (
	"context"
	"sync"
	"time"

	"github.com/leasekit/lease/internal/batchctx"
)

// groupMax bounds the Acquires that share one grant (see grants). The
// Locker's write slots (maxWrites) bound them too.
const groupMax = 128

// grants lets the Acquires of a burst share one LeaseGrant, as the
// writer lets their transactions share one Txn: an Acquire that finds no
// spare lease in the pool asks for a grant of its TTL, which goes out at
// once when fewer than maxGrantsInFlight of that TTL are under way, and
// otherwise waits for the next one, with every other Acquire that asked
// meanwhile. Each Acquire of a grant puts its tenure on the lease it
// granted. A lone Acquire costs one grant, as before; ten thousand at
// once cost about a hundred grants instead of ten thousand (raft entries
// that etcd applies one by one), and their tenures, sharing leases, cost
// one keep-alive per group when lease.Run's renewer renews them together
// (it keeps them due together: see jitter in the lease package).
//
// Every Acquire of a group asked before its grant was sent, so its
// tenure ends no earlier than the ttl after its call began (its
// Deadline) and, since the group's lease is not kept alive for others
// (below), no later than the ttl after its transaction: each tenure's
// expiry is its own, as with a lease of its own. All of a group are given
// one Expires, the ttl after the grant was sent.
//
// A keep-alive of the lease would renew every tenure on it, so it goes
// out only for a renewal of every tenure the group carries
// (ledger.keepAliveCovers); a renewal of some moves them onto leases of
// their own (see move), and the others end with the group's lease, at
// their own time. The ledger counts the lease as lent to all the
// Acquires of the grant, so it is revoked only once each has its answer
// and none put a tenure on it that is still there.
type grants struct {
	mu       sync.Mutex
	next     map[int64][]*grantCall // per TTL in seconds: the grants Acquires wait to send
	inflight map[int64]int          // per TTL: the grants under way
	closed   bool
	waiting  int            // Acquires waiting for a grant (tests read it)
	wg       sync.WaitGroup // the flushes under way
}

// maxGrantsInFlight bounds the shared grants of one TTL under way.
const maxGrantsInFlight = 1

// grantCall is a grant that several Acquires share.
type grantCall struct {
	done  chan struct{}
	ctxs  []context.Context // the Acquires' contexts
	n     int               // the Acquires that take its lease
	sent  time.Time         // before the grant was sent
	lease tenureLease
	err   error
	// sealed says the grant was sent: no Acquire joins it any more.
	sealed bool
}

// sharedGrant returns a lease for a tenure of ttl: the pool's, or one
// granted for this and the concurrent Acquires that need a lease of the
// same TTL (see grants). The lease is lent to the caller in the ledger.
// l.group says the lease is a group's: the tenure's Expires counts from
// from, the moment the grant was sent.
func (s *store) sharedGrant(ctx context.Context, ttl time.Duration, start time.Time) (l tenureLease, from time.Time, err error) {
	sec := ttlSeconds(ttl)
	g := &s.grants
	g.mu.Lock()
	if g.inflight[sec] == 0 {
		// No burst under way: a spare lease makes the Acquire one
		// transaction. In a burst, a share of the next grant serves the
		// tenures better: one keep-alive for all.
		g.mu.Unlock()
		if l, ok := s.spare(sec, start); ok {
			s.lend(&l)
			return l, start, nil
		}
		g.mu.Lock()
	}
	if g.closed {
		g.mu.Unlock()
		return tenureLease{}, start, errClosed
	}
	if g.next == nil {
		g.next, g.inflight = map[int64][]*grantCall{}, map[int64]int{}
	}
	q := g.next[sec]
	var c *grantCall
	if len(q) > 0 && q[len(q)-1].n < groupMax {
		c = q[len(q)-1]
	} else {
		c = &grantCall{done: make(chan struct{})}
		g.next[sec] = append(q, c)
	}
	c.ctxs = append(c.ctxs, ctx)
	c.n++
	g.waiting++
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	if g.inflight[sec] < maxGrantsInFlight {
		g.inflight[sec]++
		g.wg.Add(1)
		go s.flushGrants(sec)
	}
	g.mu.Unlock()

	select {
	case <-c.done:
	case <-ctx.Done():
		g.mu.Lock()
		if !c.sealed {
			c.n-- // its context stays in c.ctxs: it has ended
			g.mu.Unlock()
			return tenureLease{}, start, ctx.Err()
		}
		g.mu.Unlock()
		<-c.done // sent: the answer is on its way
		switch {
		case c.err != nil:
		case c.lease.group:
			s.unused(ctx, c.lease) // lent with the group's other Acquires
		default:
			s.pool.give(sec, c.lease.pooledLease)
		}
		return tenureLease{}, start, ctx.Err()
	}
	if c.err != nil {
		return tenureLease{}, start, c.err
	}
	if c.lease.group {
		return c.lease, c.sent, nil
	}
	l = c.lease
	s.lend(&l)
	return l, start, nil
}

// flushGrants sends the grants of TTL sec that Acquires wait for, one
// after another, until none waits.
func (s *store) flushGrants(sec int64) {
	g := &s.grants
	defer g.wg.Done()
	for {
		g.mu.Lock()
		q := g.next[sec]
		if len(q) == 0 {
			delete(g.next, sec)
			g.inflight[sec]--
			g.mu.Unlock()
			return
		}
		c := q[0]
		q[0] = nil
		g.next[sec] = q[1:]
		c.sealed = true
		if c.n == 0 {
			g.mu.Unlock()
			close(c.done)
			continue
		}
		g.mu.Unlock()

		ctx, cancel := batchctx.New(s.life, c.ctxs)
		c.sent = time.Now()
		c.lease, c.err = s.grantFor(ctx, time.Duration(sec)*time.Second, c.sent)
		cancel()
		g.mu.Lock()
		if c.err == nil && c.n > 1 {
			c.lease.group, c.lease.lent = true, true
			s.ledger.lent(c.lease.id, c.lease.ttl, c.sent, c.n)
		}
		g.mu.Unlock()
		close(c.done)
	}
}

// close makes later shared grants fail and waits for those under way
// (which the end of the Locker's life context cuts short).
func (g *grants) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
