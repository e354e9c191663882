package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/fencetest"
	"github.com/leasekit/lease/fence/redisfence"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
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
// append-only file (internal/testserver), restarted by the restart case:
// the maximum must survive.
func TestFencetestRedisRestart(t *testing.T) {
	p := testserver.StartRedis(t, &testserver.RedisOptions{Persist: true})
	h := harness(t, func(t testing.TB) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	})
	h.Restart = func(testing.TB) { p.Restart() }
	fencetest.Run(t, h)
}

// TestFencetestRedisCluster runs them on a private Redis Cluster of three
// masters, through a Cluster client. Redis refuses a script whose keys
// are in different slots (CROSSSLOT), so passing proves that a fence key
// and its data share one; and Fences of tags that live on different
// masters each work on their own node.
func TestFencetestRedisCluster(t *testing.T) {
	testenv.Slow(t)
	cluster := testserver.StartRedisCluster(t, nil)
	newClient := func(t testing.TB) redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx := context.Background()
	c := newClient(t)
	// The control: keys in two slots in one script are refused.
	err := c.Eval(ctx, "return 1", []string{"{a}x", "{b}x"}).Err()
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "slot") {
		t.Fatalf("a script with keys in two slots: %v; want Redis Cluster to refuse it", err)
	}
	fencetest.Run(t, harness(t, newClient))

	// Two tags on two masters: each fence lives with its own data.
	tags := []string{"report:1", ""}
	for i := 2; tags[1] == ""; i++ {
		if tag := fmt.Sprintf("report:%d", i); cluster.MasterFor("{"+tag+"}") != cluster.MasterFor("{"+tags[0]+"}") {
			tags[1] = tag
		}
	}
	for _, tag := range tags {
		cleanupTag(t, c, tag)
		f, err := redisfence.New(c, tag)
		if err != nil {
			t.Fatal(err)
		}
		key := "{" + tag + "}:body"
		if _, err := f.Do(ctx, "report", 10, redisfence.Cmd("SET", key, "by 10")); err != nil {
			t.Fatalf("tag %s on %s: %v", tag, cluster.MasterFor(key).Addr(), err)
		}
		if _, err := f.Do(ctx, "report", 9, redisfence.Cmd("SET", key, "by 9")); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("tag %s on %s: stale write: %v", tag, cluster.MasterFor(key).Addr(), err)
		}
	}
}
