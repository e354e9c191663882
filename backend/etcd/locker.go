package etcdlease

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Locker keeps leases in etcd. It implements lease.Locker, lease.Lister,
// lease.ForceReleaser and driver.Watcher, has RenewBatch, keeps the one
// line of waiters per name that lease.Run's WithWait and WithFairWait
// wait in (fairness is a policy over the same marks), and is safe for
// concurrent use. See the package documentation for the data model.
//
// Its Close makes later calls fail with lease.ErrClosed, ends its
// Watches and their stream, closes its keep-alive streams, revokes the spare etcd leases of its pool, waits for
// the revocations that earlier calls left running (each bounded by two
// seconds, the queued ones by two seconds in all; see "Requests ahead of
// and behind the caller" in the package documentation) and, for a Locker
// made by Open, closes the client. It does not release held leases: they
// expire.
type Locker struct {
	*base
	s *store
}

// base is the shared lease.Locker machinery every backend is built on.
type base = driver.Locker

// store is the etcd side of a Locker. It implements driver.Store,
// driver.Lister, driver.ForceReleaser, driver.BatchRenewer,
// driver.Watcher and driver.TurnWatcher.
type store struct {
	client *clientv3.Client
	// closeClient, when not nil, closes the client Open made; a client
	// given to New is the caller's.
	closeClient func() error
	prefix      string
	// minTTL is the shortest etcd lease TTL, in seconds, the cluster has
	// granted when asked for less: etcd raises short leases to its minimum.
	minTTL atomic.Int64
	// revokes runs the revocations an operation leaves behind.
	revokes revoker
	// keeper sends keep-alives on the Locker's LeaseKeepAlive stream.
	keeper *keeper
	// pool holds etcd leases granted ahead of use.
	pool *pool
	// grants lets concurrent Acquires share a grant (see group.go).
	grants grants
	// ledger decides what may happen to the etcd leases that carry
	// tenures (see ledger.go and "The lease invariant" in the package
	// documentation).
	ledger *ledger
	// busy remembers the names found held by another owner.
	busy busyNames
	// reads coalesces the single-key reads of concurrent calls.
	reads reader
	// writeSlots bounds the calls that grant etcd leases or write (a Renew
	// that moves a tenure, pool refills) under way at once.
	writeSlots chan struct{}
	// writes coalesces the owner-checked transactions of concurrent
	// calls.
	writes writer
	// watches holds the Locker's Watches (see watch.go).
	watches watches
	// marks remembers the marks of the Locker's waiters (see turns.go),
	// and markSeq numbers their keys.
	marks   marks
	markSeq atomic.Uint64
	// life ends when the Locker closes.
	life context.Context
	end  context.CancelFunc
}

var (
	_ lease.Locker         = (*Locker)(nil)
	_ lease.Lister         = (*Locker)(nil)
	_ lease.ForceReleaser  = (*Locker)(nil)
	_ driver.Lister        = (*store)(nil)
	_ driver.ForceReleaser = (*store)(nil)
)

// New returns a Locker that keeps its tenures in the etcd cluster client
// talks to. It sends nothing to the cluster. The Locker never closes
// client: Close leaves it open for the caller.
//
// A nil client, or an option with a bad value, is an error matching
// lease.ErrInvalid.
//
// Every call returns by the time its context ends, whatever the client's
// settings; etcd's client waits for an unreachable cluster for as long as
// the context allows, so give calls a deadline.
func New(client *clientv3.Client, opts ...Option) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("lease/etcd: New: %w: nil client", lease.ErrInvalid)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("lease/etcd: %w", err)
	}
	return makeLocker(client, nil, o), nil
}

// maxWrites bounds the calls other than Acquire that grant or write a
// Locker has under way at once (an Acquire's grant is shared and bounded
// per TTL, see grants, and its transaction goes through the writer,
// which bounds the transactions under way). etcd refuses proposals ("etcdserver: too many requests") once
// 5000 committed entries wait to be applied; ten thousand Acquires at once
// would get there, a queue of them on the client does not. Kept small, it
// also keeps the renewals' linearizable reads fast, which wait until etcd
// has applied what it committed before them: at 10,000 Acquires at once,
// with 64 no renewal failed, with 256 some did, and Acquires did not get
// faster.
const maxWrites = 64

func makeLocker(client *clientv3.Client, closeClient func() error, o options) *Locker {
	life, end := context.WithCancel(context.Background())
	s := &store{
		client:      client,
		closeClient: closeClient,
		prefix:      o.prefix,
		ledger:      newLedger(),
		writeSlots:  make(chan struct{}, maxWrites),
		life:        life,
		end:         end,
	}
	s.revokes.client = client
	s.markSeq.Store(uint64(time.Now().UnixNano()))
	s.reads.s, s.reads.max = s, maxReadsInFlight
	s.marks.max = maxMarks
	s.writes.s, s.writes.batch = s, maxBatchWrites
	s.watches.init(s)
	s.keeper = newKeeper(client, life)
	s.pool = newPool(s)
	return &Locker{base: driver.NewLocker("etcd", s), s: s}
}

// Prefix returns the key prefix under which the Locker keeps its tenures.
func (l *Locker) Prefix() string { return l.s.prefix }

// Close implements driver.Store: it ends the Locker's life context (which
// cuts short the shared reads and writes under way), closes the
// keep-alive streams, revokes the pool's spare etcd leases, waits for the
// etcd lease revocations that earlier calls left running (see revoker)
// and, for a Locker made by Open, closes the etcd client.
func (s *store) Close() error {
	s.end()
	s.grants.close()
	s.watches.close()
	s.reads.close()
	s.writes.close()
	s.keeper.close()
	s.pool.close()
	s.revokes.close()
	if s.closeClient == nil {
		return nil
	}
	if err := s.closeClient(); err != nil {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// key is where the tenure of name lives. Names are stored as their raw
// bytes: etcd keys are arbitrary byte strings, and key order is name
// order. The only other keys under the prefix are the waiters' marks and
// the names' pass keys (see turns.go), which start with a byte no name
// holds.
func (s *store) key(name string) string { return s.prefix + name }

// ttlSeconds is ttl in whole seconds, rounded up: the TTL asked of etcd.
func ttlSeconds(ttl time.Duration) int64 {
	return int64(math.Ceil(ttl.Seconds()))
}

// write waits (as long as ctx allows) for a write slot to send raft writes,
// and returns the function that frees it. A call takes one slot for
// all its writes (an Acquire's grant and transaction), so that a queue of
// calls never leaves a granted lease waiting for its transaction.
func (s *store) write(ctx context.Context) (done func(), err error) {
	select {
	case s.writeSlots <- struct{}{}:
		return func() { <-s.writeSlots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w (waiting for one of the %d writes under way to finish)", ctx.Err(), maxWrites)
	}
}

// grantSeconds asks etcd for a lease of sec seconds. The granted TTL may
// be longer: etcd raises it to its minimum, which grantSeconds remembers.
// The caller holds a turn to write (see write).
func (s *store) grantSeconds(ctx context.Context, sec int64) (*clientv3.LeaseGrantResponse, error) {
	g, err := s.client.Grant(ctx, sec)
	if err != nil {
		return nil, err
	}
	if g.TTL > sec {
		for {
			seen := s.minTTL.Load()
			if g.TTL <= seen || s.minTTL.CompareAndSwap(seen, g.TTL) {
				break
			}
		}
	}
	return g, nil
}

// grantedTTL is the TTL, in seconds, that etcd grants for ttl, as far as
// the Locker knows its minimum.
func (s *store) grantedTTL(ttl time.Duration) int64 {
	return max(ttlSeconds(ttl), s.minTTL.Load())
}

// held is the tenure of owner just granted or renewed by requests sent
// after start, on an etcd lease granted grantedTTL seconds: its Expires is
// the earliest the tenure can end.
func held(name, owner string, token int64, start time.Time, grantedTTL int64) driver.Tenure {
	return driver.Tenure{
		Name:    name,
		Owner:   owner,
		Token:   uint64(token),
		Expires: start.Add(time.Duration(grantedTTL) * time.Second).Round(0),
	}
}
