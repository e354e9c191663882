package testserver_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestRedisCluster: three masters with a replica each serve every slot; a
// cluster client writes through them; CLUSTER FAILOVER promotes a
// replica, and killing a master makes its replica take over.
func TestRedisCluster(t *testing.T) {
	testenv.Slow(t)
	start := time.Now()
	c := testserver.StartRedisCluster(t, &testserver.RedisClusterOptions{ReplicasPerMaster: 1})
	t.Logf("3 masters + 3 replicas ready in %s", time.Since(start))
	if len(c.Nodes()) != 6 || len(c.Addrs()) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes()))
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRedirects: 16, DialTimeout: time.Second, ContextTimeoutEnabled: true})
	defer func() { _ = cc.Close() }()
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := cc.Set(ctx5(t), k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}

	m := c.MasterFor("a")
	replicas := c.ReplicasOf(m)
	if len(replicas) != 1 {
		t.Fatalf("%s has replicas %v, want one", m.Name(), replicas)
	}
	start = time.Now()
	c.Failover(replicas[0])
	t.Logf("CLUSTER FAILOVER done in %s", time.Since(start))
	if got := c.MasterFor("a"); got != replicas[0] {
		t.Fatalf("after CLUSTER FAILOVER, %s serves a, want %s", got.Name(), replicas[0].Name())
	}
	if v := redisClient(t, replicas[0].Addr()).Get(ctx5(t), "a").Val(); v != "v" {
		t.Fatalf("the promoted replica holds %q for a, want v", v)
	}

	b := c.MasterFor("b")
	start = time.Now()
	b.Kill()
	nb := c.WaitForFailover(b)
	t.Logf("replica %s took over from killed %s in %s", nb.Name(), b.Name(), time.Since(start))
	if nb == b || c.MasterFor("b") != nb {
		t.Fatalf("after killing %s, %s serves b", b.Name(), c.MasterFor("b").Name())
	}
	// A new client: go-redis v9.23's ClusterClient made before the kill
	// goes on dialling the dead master (it reloads its slot map on MOVED,
	// not on a refused dial), which is the fault tests' business, not
	// this helper's.
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: time.Second, ContextTimeoutEnabled: true})
	defer func() { _ = fresh.Close() }()
	if err := fresh.Set(ctx5(t), "b", "after", 0).Err(); err != nil {
		t.Fatalf("SET b after the failover: %v", err)
	}
}
