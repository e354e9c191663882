package etcdlease

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the key prefix a Locker uses unless WithPrefix says
// otherwise.
const DefaultPrefix = "lease/"

// cleanupTimeout bounds a lease revocation made to clean up after an
// operation whose own context may already be done.
const cleanupTimeout = 2 * time.Second

// Option configures a Locker made by New.
type Option func(*Locker)

// WithPrefix sets the key prefix under which the Locker keeps its tenures
// (default DefaultPrefix): the tenure of name is the key prefix+name. All
// keys under the prefix belong to the Locker; Lockers that must not share
// names need prefixes neither of which is a prefix of the other. New
// panics if prefix is empty, since every key of the cluster would then be
// taken for a tenure.
func WithPrefix(prefix string) Option {
	return func(l *Locker) {
		if prefix == "" {
			panic("lease/etcd: WithPrefix: the prefix is empty")
		}
		l.prefix = prefix
	}
}

// Locker keeps leases in etcd. It implements lease.Locker, lease.Lister
// and lease.ForceReleaser and is safe for concurrent use. See the package
// documentation for the data model.
type Locker struct {
	client *clientv3.Client
	owned  bool // Close closes client
	prefix string
	closed atomic.Bool
	// minTTL is the shortest etcd lease TTL, in seconds, the cluster has
	// granted when asked for less: etcd raises short leases to its minimum.
	minTTL atomic.Int64
}

var (
	_ lease.Locker        = (*Locker)(nil)
	_ lease.Lister        = (*Locker)(nil)
	_ lease.ForceReleaser = (*Locker)(nil)
)

// New returns a Locker that keeps its tenures in the etcd cluster client
// talks to. The Locker never closes client: Close leaves it open for the
// caller.
func New(client *clientv3.Client, opts ...Option) *Locker {
	if client == nil {
		panic("lease/etcd: New: client is nil")
	}
	l := &Locker{client: client, prefix: DefaultPrefix}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Close makes every later call fail with lease.ErrClosed and, for a
// Locker made by Open, closes the etcd client it opened. It does not
// release held leases: they expire. It is safe to call more than once.
func (l *Locker) Close() error {
	if l.closed.Swap(true) || !l.owned {
		return nil
	}
	if err := l.client.Close(); err != nil {
		return fmt.Errorf("lease/etcd: close client: %w", err)
	}
	return nil
}

// begin reports whether the Locker may send requests.
func (l *Locker) begin(op string, name string) error {
	if l.closed.Load() {
		return fmt.Errorf("lease/etcd: %s %q: %w", op, name, lease.ErrClosed)
	}
	return nil
}

// key is where the tenure of name lives. Names are stored as their raw
// bytes: etcd keys are arbitrary byte strings, the Locker keeps no other
// keys under its prefix, and key order is name order.
func (l *Locker) key(name string) string { return l.prefix + name }

// ttlSeconds is ttl in whole seconds, rounded up: the TTL asked of etcd.
func ttlSeconds(ttl time.Duration) int64 {
	return int64(math.Ceil(ttl.Seconds()))
}

// grant asks etcd for a lease of ttl rounded up to whole seconds. The
// granted TTL may be longer still: etcd raises it to its minimum, which
// grant remembers.
func (l *Locker) grant(ctx context.Context, ttl time.Duration) (*clientv3.LeaseGrantResponse, error) {
	sec := ttlSeconds(ttl)
	g, err := l.client.Grant(ctx, sec)
	if err != nil {
		return nil, err
	}
	if g.TTL > sec {
		for {
			seen := l.minTTL.Load()
			if g.TTL <= seen || l.minTTL.CompareAndSwap(seen, g.TTL) {
				break
			}
		}
	}
	return g, nil
}

// grantedTTL is the TTL, in seconds, that etcd grants for ttl, as far as
// the Locker knows its minimum.
func (l *Locker) grantedTTL(ttl time.Duration) int64 {
	return max(ttlSeconds(ttl), l.minTTL.Load())
}

// revoke revokes an etcd lease, deleting any key attached to it. A lease
// that is already gone is no error.
func (l *Locker) revoke(ctx context.Context, id clientv3.LeaseID) error {
	if id == clientv3.NoLease {
		return nil
	}
	_, err := l.client.Revoke(ctx, id)
	if err != nil && isLeaseNotFound(err) {
		return nil
	}
	return err
}

// cleanup revokes a lease granted by an operation that is not going to
// use it, even if ctx is done. Errors are dropped: the lease expires by
// itself after its TTL.
func (l *Locker) cleanup(ctx context.Context, id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = l.revoke(ctx, id)
}

// lease builds the Lease of a tenure just granted or renewed by requests
// sent after start, on an etcd lease granted grantedTTL seconds.
func (l *Locker) lease(name, owner string, token int64, start time.Time, ttl time.Duration, grantedTTL int64) lease.Lease {
	return lease.Lease{
		Name:     name,
		Owner:    owner,
		Token:    uint64(token),
		Expires:  start.Add(time.Duration(grantedTTL) * time.Second).Round(0),
		Deadline: lease.DeadlineFrom(start, ttl),
	}
}
