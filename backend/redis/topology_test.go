package redislease_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/testserver"
)

// TestTopologyURLsRefused: Sentinel and Cluster URLs that cannot work are
// refused before anything is dialled, with errors that say why.
func TestTopologyURLsRefused(t *testing.T) {
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

// TestSentinelFailoverDuringContention: four Lockers, each on its own
// redis+sentinel:// client as four processes would be, contend for one
// name while the master fails over (SENTINEL FAILOVER). See
// contendThroughFailover for what is checked.
func TestSentinelFailoverDuringContention(t *testing.T) {
	s := testserver.StartSentinel(t, nil)
	raw := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/0?master_name=" + s.MasterName() + "&prefix=contend:&dial_timeout=1s&read_timeout=1s&write_timeout=1s"
	contendThroughFailover(t, raw, func() { s.Failover() })
}

// TestClusterFailoverDuringContention: the same on a Redis Cluster of
// three masters with a replica each, through redis+cluster:// clients,
// while the replica of the name's master takes over (CLUSTER FAILOVER).
func TestClusterFailoverDuringContention(t *testing.T) {
	c := testserver.StartRedisCluster(t, &testserver.RedisClusterOptions{ReplicasPerMaster: 1})
	raw := "redis+cluster://" + strings.Join(c.Addrs(), ",") + "?prefix=contend:&dial_timeout=1s&read_timeout=1s&write_timeout=1s"
	sum := sha256.Sum256([]byte("contended"))
	key := "contend:{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}:lease"
	contendThroughFailover(t, raw, func() {
		m := c.MasterFor(key)
		c.Failover(c.ReplicasOf(m)[0])
	})
}

// contendThroughFailover has four Lockers on their own clients of the
// store at raw contend for one name for 6s, and calls failover after a
// second. Tokens keep growing: every tenure granted after the failover
// has a larger token than every tenure before it, so a fence that keeps
// the largest token refuses every stale write. Replication is
// asynchronous, so a failover can lose a grant and give the name to a
// second holder while the first still holds it: the test counts such
// overlaps and reports them, it does not forbid them (see "What a lease
// guarantees" in the README).
func contendThroughFailover(t *testing.T, raw string, failover func()) {
	t.Helper()
	type grant struct {
		token    uint64
		at, till time.Time
	}
	var (
		mu         sync.Mutex
		grants     []grant
		fence      uint64
		fenceOwner string
		stale      int
		storeErrs  int
	)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		l, err := lease.Open(t.Context(), raw)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wg.Go(func() {
			owner := "worker-" + itoa(w)
			for i := 0; ctx.Err() == nil && i < 10000; i++ {
				held, err := l.Acquire(ctx, "contended", owner, 2*time.Second)
				if err != nil {
					if !errors.Is(err, lease.ErrHeld) && ctx.Err() == nil {
						mu.Lock()
						storeErrs++
						mu.Unlock()
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				at := time.Now()
				mu.Lock()
				switch {
				case held.Token == fence && owner == fenceOwner:
					// Re-entrant: this worker's Release failed during the
					// failover, and the tenure goes on.
				case held.Token <= fence:
					stale++ // the fence refuses this holder's writes
					t.Logf("%s was granted token %d, below %d, which %s holds: a grant the failover lost", owner, held.Token, fence, fenceOwner)
				default:
					fence, fenceOwner = held.Token, owner
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				grants = append(grants, grant{held.Token, at, time.Now()})
				mu.Unlock()
				_ = l.Release(context.WithoutCancel(ctx), held)
			}
		})
	}
	time.Sleep(time.Second)
	start := time.Now()
	failover()
	end := time.Now()
	t.Logf("failover done in %s", end.Sub(start))
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	overlaps := 0
	for i := range grants {
		for j := i + 1; j < len(grants); j++ {
			if grants[j].at.Before(grants[i].till) && grants[i].at.Before(grants[j].till) {
				overlaps++
			}
		}
	}
	var before, after uint64 // the largest token before, the smallest after
	after = ^uint64(0)
	nAfter := 0
	for _, g := range grants {
		switch {
		case g.till.Before(start):
			before = max(before, g.token)
		case g.at.After(end):
			after = min(after, g.token)
			nAfter++
		}
	}
	t.Logf("%d tenures (%d after the failover), %d overlapping pairs, %d tokens no larger than one seen before (the fence refuses their writes), %d store errors",
		len(grants), nAfter, overlaps, stale, storeErrs)
	if nAfter < 10 {
		t.Fatalf("only %d tenures after the failover: the Lockers did not follow the new master", nAfter)
	}
	if after <= before {
		t.Fatalf("a tenure granted after the failover has token %d, not above %d, the largest before it: tokens went back", after, before)
	}
}
