package redislease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestTopologyURLsFollowDeadlines: the clients that redis+sentinel:// and
// redis+cluster:// URLs open follow context deadlines, as Open's plain
// client does. With the master frozen (SIGSTOP: it keeps its connections
// and answers nothing) and read and write timeouts of 30s in the URL,
// every call returns by its context's deadline with an error matching
// context.DeadlineExceeded; a client without ContextTimeoutEnabled would
// wait out the 30s.
func TestTopologyURLsFollowDeadlines(t *testing.T) {
	testenv.Slow(t)
	const slow = "&read_timeout=30s&write_timeout=30s&max_retries=-1"
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		// No failover while the master is frozen: the calls must end by
		// their deadlines, not by the sentinels' promoting a replica.
		s := testserver.StartSentinel(t, &testserver.SentinelOptions{DownAfter: time.Minute})
		raw := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/0?master_name=" + s.MasterName() + "&prefix=deadline:" + slow
		checkFrozenStore(t, raw, []*testserver.Process{s.Master()})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := testserver.StartRedisCluster(t, nil)
		raw := "redis+cluster://" + strings.Join(c.Addrs(), ",") + "?prefix=deadline:" + slow[1:]
		checkFrozenStore(t, raw, c.Nodes())
	})
}

// checkFrozenStore opens raw with lease.Open, acquires a lease, freezes
// the servers and checks that each call returns by its deadline.
func checkFrozenStore(t *testing.T, raw string, servers []*testserver.Process) {
	t.Helper()
	opened, err := lease.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", raw, err)
	}
	defer opened.Close()
	l, ok := opened.(*redislease.Locker)
	if !ok {
		t.Fatalf("lease.Open(%s) gave a %T", raw, opened)
	}
	held, err := l.Acquire(t.Context(), "jobs/x", "owner", time.Minute)
	if err != nil {
		t.Fatalf("Acquire before the freeze: %v", err)
	}
	for _, p := range servers {
		p.Pause()
	}
	defer func() {
		for _, p := range servers {
			p.Resume()
		}
	}()
	checkReturnsByDeadline(t, "Acquire", func(ctx context.Context) error {
		_, err := l.Acquire(ctx, "jobs/x", "other", time.Minute)
		return err
	})
	checkReturnsByDeadline(t, "Renew", func(ctx context.Context) error {
		_, err := l.Renew(ctx, held, time.Minute)
		return err
	})
	checkReturnsByDeadline(t, "RenewBatch", func(ctx context.Context) error {
		res := batchtest.RenewBatch(ctx, l, []batchtest.Req{{Lease: held, TTL: time.Minute}})
		return res[0].Err
	})
	checkReturnsByDeadline(t, "Release", func(ctx context.Context) error {
		return l.Release(ctx, held)
	})
	checkReturnsByDeadline(t, "Inspect", func(ctx context.Context) error {
		_, err := l.Inspect(ctx, "jobs/x")
		return err
	})
}
