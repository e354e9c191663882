package redislease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
)

// ErrReplicas is matched (errors.Is) by the error of an Acquire or Renew
// that Redis carried out but that fewer replicas than WithReplicaAck asks
// for acknowledged in time. It is a store failure, never a lease outcome:
// the tenure exists on the master, a retry of the Acquire is re-entrant,
// and lease.Run treats it as it treats any store failure.
var ErrReplicas = errors.New("not acknowledged by enough replicas")

// WithReplicaAck makes every Acquire and Renew (and each RenewBatch
// pipeline) wait, in the same round trip, until n replicas have
// acknowledged its write, for at most timeout (Redis's WAIT n timeout):
// when fewer did, the call fails with an error matching ErrReplicas. A
// failover to an acknowledging replica then keeps the tenure, which
// narrows the window in which asynchronous replication can grant a name
// twice; it does not close it (a replica that acknowledged may not be the
// one promoted, and WAIT does not make the write durable on disk). The
// cost is the replicas' round trip on every write. n must be at least 1
// and timeout positive; a Cluster or Ring client is refused (WAIT must
// reach the master of each key, which their pipelines do not promise).
// URL parameters: wait_replicas=N, wait_timeout=D (100ms by default).
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) error {
		if n < 1 || timeout <= 0 {
			return fmt.Errorf("%w: WithReplicaAck(%d, %s): want at least 1 replica and a positive timeout", lease.ErrInvalid, n, timeout)
		}
		o.replicas, o.replicaTimeout = n, timeout
		return nil
	}
}

// defaultReplicaTimeout is wait_timeout when a URL gives wait_replicas
// alone.
const defaultReplicaTimeout = 100 * time.Millisecond

// runScript runs script as Script.Run does (EVALSHA, then EVAL when the
// server lacks it) and, with WithReplicaAck, WAIT after it in the same
// round trip.
func (s *store) runScript(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	if s.replicas == 0 {
		return script.Run(ctx, s.client, keys, args...).Result()
	}
	for _, eval := range []bool{false, true} {
		pipe := s.client.Pipeline()
		var cmd *redis.Cmd
		if eval {
			cmd = script.Eval(ctx, pipe, keys, args...)
		} else {
			cmd = script.EvalSha(ctx, pipe, keys, args...)
		}
		wait := s.wait(ctx, pipe)
		_, _ = pipe.Exec(ctx)
		v, err := cmd.Result()
		if err != nil && !eval && redis.HasErrorPrefix(err, "NOSCRIPT") {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := s.acknowledged(wait); err != nil {
			return nil, err
		}
		return v, nil
	}
	panic("unreachable")
}

// wait queues WAIT on pipe when the Locker asks for acknowledgements, and
// returns its command (nil otherwise).
func (s *store) wait(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	if s.replicas == 0 {
		return nil
	}
	return pipe.Do(ctx, "WAIT", s.replicas, s.replicaTimeout.Milliseconds())
}

// acknowledged checks a WAIT's answer.
func (s *store) acknowledged(wait *redis.Cmd) error {
	if wait == nil {
		return nil
	}
	n, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("WAIT for %d replicas: %w", s.replicas, err)
	}
	if int(n) < s.replicas {
		return fmt.Errorf("%d of %d replicas acknowledged the write within %s: %w", n, s.replicas, s.replicaTimeout, ErrReplicas)
	}
	return nil
}
