package redislease

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Locker is a lease store on Redis. It implements lease.Locker,
// lease.Lister, lease.ForceReleaser and driver.Watcher, has RenewBatch
// (see "Waiting" in the package documentation; lease.Can says whether it
// can watch: not on a Ring), and is safe for concurrent use. Acquire,
// Renew, Release, Inspect and ForceRelease each take one round trip: one
// Lua script (see the .lua files of this package); a waiting Acquire too,
// once its turn Watch is in place, and none when another waiter of the
// Locker asks for the name (see "Waiting").
//
// Close makes every later call fail with an error matching
// lease.ErrClosed and ends the Watches' pub/sub connection; it closes the
// Redis client only when Open made it. Held
// leases are not released by Close: they expire.
type Locker struct {
	*base
	s *store
}

// base is the shared lease.Locker machinery every backend is built on.
type base = driver.Locker

var (
	_ lease.Locker        = (*Locker)(nil)
	_ lease.Lister        = (*Locker)(nil)
	_ lease.ForceReleaser = (*Locker)(nil)
)

// Option configures a Locker made by New or Open. An Option given a bad
// value makes New or Open return an error matching lease.ErrInvalid.
type Option func(*options) error

type options struct {
	prefix string
	// replicas and replicaTimeout are WithReplicaAck's.
	replicas       int
	replicaTimeout time.Duration
}

// WithPrefix puts prefix before every key the Locker uses (DefaultPrefix,
// "lease:", by default). Lockers with different prefixes on one Redis are
// separate stores that never see each other's leases. The prefix may hold
// any bytes except '{' and '}', which would change the part of each key
// that Redis Cluster hashes: New and Open refuse those with an error
// matching lease.ErrInvalid.
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if err := checkPrefix(prefix); err != nil {
			return fmt.Errorf("%w: WithPrefix: %v", lease.ErrInvalid, err)
		}
		o.prefix = prefix
		return nil
	}
}

func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("key prefix %q contains a brace, which would change the Redis Cluster hash tag of every key", prefix)
	}
	return nil
}

// New returns a Locker on client, which may be a single node, a Sentinel
// failover client, a Cluster client or a Ring (a name's keys share a hash
// tag, so they stay on one shard; but a Ring has no failover, and a shard
// that goes down takes its tenures with it). A nil client, or an Option
// with a bad value, is an error matching lease.ErrInvalid. New sends
// nothing to Redis: the scripts are loaded into the server's script cache
// on first use (EVALSHA falls back to EVAL once per script and server).
// The Locker never closes client: its Close leaves it open for the caller.
//
// Context deadlines: every call returns by its context's deadline only if
// client was built with ContextTimeoutEnabled: true (in redis.Options,
// redis.FailoverOptions, redis.ClusterOptions, redis.RingOptions or
// redis.UniversalOptions), which makes go-redis set each socket read and
// write deadline to the earlier of the context's deadline and its
// ReadTimeout/WriteTimeout. Without it go-redis ignores the context's
// deadline once a request is on the wire: a call to a server that stopped
// answering returns only when go-redis's ReadTimeout ends it (5s by
// default), with an error that still matches context.DeadlineExceeded but
// late, and lease.Run learns that the store is gone that much later. A
// ReadTimeout or WriteTimeout of -2 (no socket deadlines at all) defeats
// the context too. Waiting for a pooled connection and dialing follow the
// context either way. go-redis follows a context's deadline, not its
// cancellation: cancelling a context without a deadline stops go-redis's
// resends, but a request already waiting for its reply waits up to
// ReadTimeout. Open builds its client with ContextTimeoutEnabled.
//
// New does not refuse a client without ContextTimeoutEnabled: such a
// client is still bounded, by its ReadTimeout, programs that chose it may
// rely on that, and the choice belongs to whoever owns the client.
func New(client redis.UniversalClient, opts ...Option) (*Locker, error) {
	return newLocker(client, false, opts)
}

// newLocker is New; owned says whether the Locker's Close closes client.
func newLocker(client redis.UniversalClient, owned bool, opts []Option) (*Locker, error) {
	if isNil(client) {
		return nil, fmt.Errorf("lease/redis: New: %w: nil client", lease.ErrInvalid)
	}
	o := options{prefix: DefaultPrefix}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("lease/redis: %w", err)
		}
	}
	if o.replicas > 0 {
		switch client.(type) {
		case *redis.ClusterClient, *redis.Ring:
			return nil, fmt.Errorf("lease/redis: %w: WithReplicaAck needs a client of one master (a plain or Sentinel client): a %T's pipelines do not keep WAIT with the writes it waits for", lease.ErrInvalid, client)
		}
	}
	s := &store{client: client, owned: owned, prefix: o.prefix, replicas: o.replicas, replicaTimeout: o.replicaTimeout, pipes: newPipeliner(client)}
	s.subs.init(client)
	return &Locker{base: driver.NewLocker("redis", s), s: s}, nil
}

// isNil reports whether client is nil, including a nil pointer of a
// client type (var c *redis.Client; New(c)).
func isNil(client redis.UniversalClient) bool {
	if client == nil {
		return true
	}
	v := reflect.ValueOf(client)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Prefix returns the key prefix the Locker uses.
func (l *Locker) Prefix() string { return l.s.prefix }

// store is the Redis side of a Locker: it implements driver.Store,
// driver.Lister and driver.ForceReleaser.
type store struct {
	client redis.UniversalClient
	owned  bool // Close closes client: Open made it
	prefix string
	// replicas, when above 0, is how many replicas must acknowledge each
	// Acquire and Renew within replicaTimeout (WithReplicaAck).
	replicas       int
	replicaTimeout time.Duration
	subs           subs       // the Watches' pub/sub connection (watch.go)
	pipes          *pipeliner // Acquire, Renew and Release share round trips (pipeline.go)
}

var (
	_ driver.Lister        = (*store)(nil)
	_ driver.ForceReleaser = (*store)(nil)
	_ driver.Capable       = (*store)(nil)
)

// Can implements driver.Capable, so that lease.Can tells the truth about
// the Locker. Listing, force-releasing and renewing in batches work on
// every client. Watching, and waiting in the line of waiters (a turn
// Watch), work on every client but a Ring, where Watch and WatchTurn
// report errors.ErrUnsupported (see canWatch): there Can says no, and
// lease.Run's WithWait polls while WithFairWait fails at once. Can says
// no to any other interface.
func (s *store) Can(p any) bool {
	switch p.(type) {
	case *driver.Lister, *driver.ForceReleaser, *driver.BatchRenewer:
		return true
	case *driver.Watcher, *driver.TurnWatcher:
		return s.canWatch()
	}
	return false
}

// Close implements driver.Store: it closes the client only when Open made
// it; a client given to New stays open. Held leases are not released:
// they expire.
func (s *store) Close() error {
	s.subs.close()
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// ttlMillis returns ttl in whole milliseconds, rounded up: the store must
// never end a tenure before the caller's ttl.
func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}
