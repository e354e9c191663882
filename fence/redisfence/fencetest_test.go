package redisfence_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/fence/fencetest"
)

// TestFencetestMiniredis runs the shared cases on miniredis, as plain
// go test does on a machine without Redis.
func TestFencetestMiniredis(t *testing.T) {
	fencetest.Run(t, harness(t, miniredisClients(t)))
}

// TestFencetestMiniredisCluster runs them through a go-redis Cluster
// client (miniredis answers CLUSTER SLOTS as a one-node cluster), so every
// script goes through Cluster slot routing.
func TestFencetestMiniredisCluster(t *testing.T) {
	mr := miniredis.RunT(t)
	fencetest.Run(t, harness(t, func(t testing.TB) redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}))
}

// TestFencetestRedis runs them on the real server in LEASE_TEST_REDIS,
// under a fresh hash tag whose keys it deletes afterwards.
func TestFencetestRedis(t *testing.T) {
	fencetest.Run(t, harness(t, realClients(t)))
}

// TestFencetestRedisRestart runs them on a private redis-server with an
// append-only file, restarted by the restart case: the maximum must
// survive.
func TestFencetestRedisRestart(t *testing.T) {
	p := startPrivateRedis(t)
	h := harness(t, func(t testing.TB) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: p.addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	})
	h.Restart = func(testing.TB) { p.restart() }
	fencetest.Run(t, h)
}

// TestFencetestRedisCluster runs them on a real Redis Cluster node that
// owns every slot, through a Cluster client. In cluster mode Redis itself
// refuses a script whose keys are in different slots (CROSSSLOT), so
// passing proves the fence key and the data share one.
func TestFencetestRedisCluster(t *testing.T) {
	p := startPrivateRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	c := redis.NewClient(&redis.Options{Addr: p.addr()})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the one-node cluster is not ok after 10s: %v\n%s", err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The control: keys in two slots in one script are refused.
	err := c.Eval(ctx, "return 1", []string{"{a}x", "{b}x"}).Err()
	if err == nil || !strings.Contains(err.Error(), "slot") {
		t.Fatalf("a script with keys in two slots: %v; want Redis to refuse it (is the node in cluster mode?)", err)
	}
	fencetest.Run(t, harness(t, func(t testing.TB) redis.UniversalClient {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.addr()}})
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}))
}
