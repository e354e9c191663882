package redislease

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

// Locker is a lease store on Redis. It implements lease.Locker,
// lease.Lister and lease.ForceReleaser, and is safe for concurrent use.
// Acquire, Renew, Release, Inspect and ForceRelease each take one round
// trip: one Lua script (see the .lua files of this package).
type Locker struct {
	client redis.UniversalClient
	owned  bool // Close closes client: Open made it
	prefix string
	closed atomic.Bool
}

var (
	_ lease.Locker        = (*Locker)(nil)
	_ lease.Lister        = (*Locker)(nil)
	_ lease.ForceReleaser = (*Locker)(nil)
)

// Option configures a Locker made by New or Open.
type Option func(*Locker)

// WithPrefix puts prefix before every key the Locker uses (DefaultPrefix,
// "lease:", by default). Lockers with different prefixes on one Redis are
// separate stores that never see each other's leases. The prefix may hold
// any bytes except '{' and '}', which would change the part of each key
// that Redis Cluster hashes; WithPrefix panics on them, as on a
// programming error.
func WithPrefix(prefix string) Option {
	if err := checkPrefix(prefix); err != nil {
		panic(err)
	}
	return func(l *Locker) { l.prefix = prefix }
}

func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: lease/redis: key prefix %q contains a brace, which would change the Redis Cluster hash tag", lease.ErrInvalid, prefix)
	}
	return nil
}

// New returns a Locker on client, which may be a single node, a Sentinel
// failover client, a Cluster client or a Ring (a name's two keys share a
// hash tag, so they stay on one shard; but a Ring has no failover, and a
// shard that goes down takes its tenures with it). The Locker never closes client: its
// Close leaves it open for the caller. The scripts are loaded into Redis's
// script cache on first use (EVALSHA falls back to EVAL once per server).
func New(client redis.UniversalClient, opts ...Option) *Locker {
	l := &Locker{client: client, prefix: DefaultPrefix}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Prefix returns the key prefix the Locker uses.
func (l *Locker) Prefix() string { return l.prefix }

// Close makes every later call fail with an error matching lease.ErrClosed.
// It closes the Redis client only when Open made it; a client given to New
// stays open. Held leases are not released: they expire. Calling Close
// again returns nil.
func (l *Locker) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	if l.owned {
		if err := l.client.Close(); err != nil {
			return fmt.Errorf("lease/redis: close: %w", err)
		}
	}
	return nil
}

// begin checks that the Locker is open and ctx is live before a request.
func (l *Locker) begin(ctx context.Context) error {
	if l.closed.Load() {
		return lease.ErrClosed
	}
	return ctx.Err()
}

// ttlMillis returns ttl in whole milliseconds, rounded up: the store must
// never end a tenure before the caller's ttl.
func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}
