package redislease_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestReplicaAck: with wait_replicas=1, Acquire, Renew and RenewBatch
// succeed while the replica keeps up, and fail with ErrReplicas (a store
// failure, not ErrHeld or ErrLost) while it is stopped; the master holds
// the tenure all the same, and a retried Acquire is re-entrant.
func TestReplicaAck(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	s := testserver.StartSentinel(t, nil)
	raw := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/0?master_name=" + s.MasterName() + "&wait_replicas=1&wait_timeout=300ms"
	l, err := redislease.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	defer l.Close()
	ctx := t.Context()
	held, err := l.Acquire(ctx, "acked", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire with the replica up: %v", err)
	}
	if held, err = l.Renew(ctx, held, time.Minute); err != nil {
		t.Fatalf("Renew with the replica up: %v", err)
	}
	if r := batchtest.RenewBatch(ctx, l, []batchtest.Req{{Lease: held, TTL: time.Minute}}); r[0].Err != nil {
		t.Fatalf("RenewBatch with the replica up: %v", r[0].Err)
	} else {
		held = r[0].Lease
	}

	replica := s.Servers()[1]
	replica.Pause()
	start := time.Now()
	_, err = l.Acquire(ctx, "unacked", "a", time.Minute)
	if !errors.Is(err, redislease.ErrReplicas) || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire with the replica stopped: %v; want ErrReplicas", err)
	}
	t.Logf("an unacknowledged Acquire failed after %s (wait_timeout 300ms)", time.Since(start).Round(time.Millisecond))
	if _, err := l.Renew(ctx, held, time.Minute); !errors.Is(err, redislease.ErrReplicas) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew with the replica stopped: %v; want ErrReplicas", err)
	}
	if r := batchtest.RenewBatch(ctx, l, []batchtest.Req{{Lease: held, TTL: time.Minute}}); !errors.Is(r[0].Err, redislease.ErrReplicas) {
		t.Fatalf("RenewBatch with the replica stopped: %v; want ErrReplicas", r[0].Err)
	}
	replica.Resume()
	again, err := l.Acquire(ctx, "unacked", "a", time.Minute)
	if err != nil {
		t.Fatalf("the retried Acquire with the replica back: %v", err)
	}
	if err := l.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaAckRefused: WithReplicaAck with bad values, in a URL or in Go,
// and on a Cluster client, is an error matching ErrInvalid.
func TestReplicaAckRefused(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"redis://127.0.0.1:6379/0?wait_replicas=0",
		"redis://127.0.0.1:6379/0?wait_replicas=one",
		"redis://127.0.0.1:6379/0?wait_replicas=1&wait_timeout=-1s",
		"redis+cluster://127.0.0.1:7000?wait_replicas=1",
	} {
		if _, err := lease.Open(t.Context(), raw); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("lease.Open(%s) = %v; want ErrInvalid", raw, err)
		}
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	defer c.Close()
	if _, err := redislease.New(c, redislease.WithReplicaAck(1, time.Second)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(cluster client, WithReplicaAck) = %v; want ErrInvalid", err)
	}
	one := redis.NewClient(&redis.Options{})
	defer one.Close()
	if _, err := redislease.New(one, redislease.WithReplicaAck(1, 0)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("WithReplicaAck(1, 0) = %v; want ErrInvalid", err)
	}
}

// BenchmarkReplicaAck measures what WithReplicaAck(1, 1s) costs an
// Acquire+Release cycle on a master with one replica (private servers, on
// one machine): go test -run '^$' -bench ReplicaAck ./backend/redis/
func BenchmarkReplicaAck(b *testing.B) {
	s := testserver.StartSentinel(b, nil)
	base := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/0?master_name=" + s.MasterName()
	for _, c := range []struct{ name, params string }{{"no-wait", ""}, {"wait-1", "&wait_replicas=1&wait_timeout=1s"}} {
		b.Run(c.name, func(b *testing.B) {
			l, err := redislease.Open(context.Background(), base+c.params)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				held, err := l.Acquire(ctx, "bench-"+strconv.Itoa(i%64), "a", time.Minute)
				if err == nil {
					err = l.Release(ctx, held)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
