package redislease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestTopologyURLsRefused: Sentinel and Cluster URLs that cannot work are
// refused before anything is dialled, with errors that say why.
func TestTopologyURLsRefused(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"redis+sentinel://h1:26379,h2:26379/0":                         "master_name",
		"redis+cluster://h1:7000,h2:7001?master_name=m":                "Sentinel URLs",
		"redis+cluster://h1:7000,h2:7001/3":                            "only database 0",
		"redis+sentinel://h1:26379,:26379?master_name=m":               "host:port",
		"redis+sentinel://h1:notaport?master_name=m":                   "does not parse",
		"redis+sentinel://h1:26379?master_name=m&master_name=n":        "2 times",
		"redis+sentinel://h1:26379?master_name=m&no_such_option=1":     "no_such_option",
		"redis+shards://h1:26379":                                      "redis+shards",
		"redis+sentinel://u:hunter2@h1:26379,h2:26379/x?master_name=m": "database number",
	} {
		_, err := lease.Open(context.Background(), raw)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("lease.Open(%s) = %v; want ErrInvalid saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("lease.Open(%s) quoted the password: %v", raw, err)
		}
	}
}

// TestSentinelURL: a redis+sentinel:// URL reaches the master the
// Sentinels name, and follows it through a failover.
func TestSentinelURL(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	s := testserver.StartSentinel(t, nil)
	raw := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/0?master_name=" + s.MasterName() + "&prefix=sentinel-url:"
	l, err := lease.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", raw, err)
	}
	defer l.Close()
	held, err := l.Acquire(t.Context(), "job", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Failover()
	// The write that granted the tenure reached the replica before the
	// failover (SENTINEL FAILOVER waits for it), so the new master has it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got lease.Lease
	for {
		if got, err = l.Inspect(ctx, "job"); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || got.Token != held.Token {
		t.Fatalf("after the failover, Inspect = %v, %v; want %v", got, err, held)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
}

// TestClusterURL: a redis+cluster:// URL spreads names over the slots of
// the cluster's masters.
func TestClusterURL(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	c := testserver.StartRedisCluster(t, nil)
	raw := "redis+cluster://" + strings.Join(c.Addrs(), ",")
	l, err := redislease.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	defer l.Close()
	masters := map[string]bool{}
	for i := range 30 {
		name := "job-" + itoa(i)
		held, err := l.Acquire(t.Context(), name, "a", time.Minute)
		if err != nil {
			t.Fatalf("Acquire %s: %v", name, err)
		}
		if err := l.Release(t.Context(), held); err != nil {
			t.Fatal(err)
		}
		masters[c.MasterFor(l.Prefix()+"{").Addr()] = true
	}
}
