package testserver_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestSentinel: the sentinels report the master; a requested failover
// promotes the replica, which then takes writes through a failover
// client.
func TestSentinel(t *testing.T) {
	testenv.Slow(t)
	start := time.Now()
	s := testserver.StartSentinel(t, nil)
	t.Logf("master, replica and 3 sentinels ready in %s", time.Since(start))
	servers := s.Servers()
	if len(servers) != 2 || len(s.SentinelAddrs()) != 3 || s.MasterName() != "mymaster" {
		t.Fatalf("servers %d, sentinels %v, name %q", len(servers), s.SentinelAddrs(), s.MasterName())
	}
	if m := s.Master(); m != servers[0] {
		t.Fatalf("master is %s, want the first server %s", m.Addr(), servers[0].Addr())
	}

	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs(),
		MaxRetries: 10, DialTimeout: time.Second, ContextTimeoutEnabled: true,
	})
	defer func() { _ = fc.Close() }()
	if err := fc.Set(ctx5(t), "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	m := s.Failover()
	t.Logf("SENTINEL FAILOVER done in %s", time.Since(start))
	if m != servers[1] {
		t.Fatalf("new master %s, want the replica %s", m.Addr(), servers[1].Addr())
	}
	if err := fc.Set(ctx5(t), "k", "after", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client after the failover: %v", err)
	}
	if v := redisClient(t, m.Addr()).Get(ctx5(t), "k").Val(); v != "after" {
		t.Fatalf("new master holds %q, want %q", v, "after")
	}
}

// TestSentinelKilledMaster: killing the master makes the sentinels
// promote the replica on their own.
func TestSentinelKilledMaster(t *testing.T) {
	testenv.Slow(t)
	s := testserver.StartSentinel(t, &testserver.SentinelOptions{Replicas: 2, MasterName: "lease"})
	old := s.Master()
	start := time.Now()
	old.Kill()
	m := s.WaitForFailover(old)
	t.Logf("sentinels promoted %s %s after the master was killed", m.Name(), time.Since(start))
	if m == old {
		t.Fatal("the killed master is still reported")
	}
	if err := redisClient(t, m.Addr()).Set(ctx5(t), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on the new master: %v", err)
	}
}
