package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/testenv"
)

// scriptTrips counts the round trips that run scripts: pipelines, and
// single EVAL or EVALSHA commands (not a new connection's HELLO and
// CLIENT SETINFO, which go-redis pipelines too), and the scripts' commands
// (evalsha or eval) of each.
type scriptTrips struct {
	mu    sync.Mutex
	trips int
	cmds  int
	log   [][]string
}

func (h *scriptTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "eval" || n == "evalsha" {
			h.mu.Lock()
			h.trips++
			h.cmds++
			h.log = append(h.log, []string{n})
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *scriptTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var scripts []string
		for _, c := range cmds {
			if n := c.Name(); n == "eval" || n == "evalsha" {
				scripts = append(scripts, n)
			}
		}
		if len(scripts) > 0 {
			h.mu.Lock()
			h.trips++
			h.cmds += len(scripts)
			h.log = append(h.log, scripts)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func (h *scriptTrips) take() (trips, cmds int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	trips, cmds = h.trips, h.cmds
	h.trips, h.cmds, h.log = 0, 0, nil
	return trips, cmds
}

// takeLog returns the scripts' commands of each round trip since the
// last take, and starts counting anew.
func (h *scriptTrips) takeLog() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	log := h.log
	h.trips, h.cmds, h.log = 0, 0, nil
	return log
}

// batchStores runs fn on a miniredis whose clock the test moves and on the
// real server (a subtest that skips, or fails in CI, when LEASE_TEST_REDIS
// is unset). expire makes a tenure of expiringTTL, just granted, end.
func batchStores(t *testing.T, fn func(t *testing.T, client *redis.Client, l *redislease.Locker, expire func(lease.Lease))) {
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		_, client, advance := newMiniredis(t)
		fn(t, client, mustNew(t, client), func(lease.Lease) { advance(10 * expiringTTL) })
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		client, _ := realRedis(t, -1)
		prefix := randomPrefix("batch")
		deleteKeys(t, client, prefix)
		l := mustNew(t, client, redislease.WithPrefix(prefix))
		fn(t, client, l, func(ls lease.Lease) { waitExpired(t, l, ls, 10*expiringTTL) })
	})
}

const expiringTTL = 30 * time.Millisecond

// waitExpired waits until the server no longer holds ls's tenure (Inspect
// says the name is free), and fails t if it still does within.
func waitExpired(t *testing.T, l *redislease.Locker, ls lease.Lease, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		cur, err := l.Inspect(context.Background(), ls.Name)
		if errors.Is(err, lease.ErrNotHeld) {
			return
		}
		if err != nil {
			t.Fatalf("Inspect %s while waiting for its tenure of %s to expire: %v", ls.Name, expiringTTL, err)
		}
		if cur.Token != ls.Token {
			t.Fatalf("Inspect %s while waiting for its tenure to expire: %+v, another tenure than %+v", ls.Name, cur, ls)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenure %+v of %s is still held %s later", ls, expiringTTL, within)
		}
	}
}

// batchScenario holds leases in every state a renewal can meet under
// names tagged with tag, and returns the requests for them: intact,
// released, taken over after a force release, expired, intact named
// twice, and forged for a name never acquired.
func batchScenario(t *testing.T, l *redislease.Locker, tag string, expire func(lease.Lease)) []batchtest.Req {
	t.Helper()
	ctx := context.Background()
	acquire := func(name, owner string, ttl time.Duration) lease.Lease {
		t.Helper()
		ls, err := l.Acquire(ctx, tag+name, owner, ttl)
		if err != nil {
			t.Fatalf("Acquire %s: %v", name, err)
		}
		return ls
	}
	intact := acquire("intact", "a", time.Minute)
	released := acquire("released", "a", time.Minute)
	if err := l.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	taken := acquire("taken", "a", time.Minute)
	if _, err := l.ForceRelease(ctx, taken.Name); err != nil {
		t.Fatal(err)
	}
	acquire("taken", "b", time.Minute)
	expired := acquire("expired", "a", expiringTTL)
	expire(expired)
	twice := acquire("twice", "a", time.Minute)
	forged := lease.Lease{Name: tag + "never", Owner: "a", Token: intact.Token, Deadline: intact.Deadline}
	return []batchtest.Req{
		{Lease: intact, TTL: time.Minute},
		{Lease: released, TTL: time.Minute},
		{Lease: taken, TTL: time.Minute},
		{Lease: expired, TTL: time.Minute},
		{Lease: twice, TTL: 2 * time.Minute},
		{Lease: forged, TTL: time.Minute},
		{Lease: twice, TTL: time.Minute},
	}
}

// outcome is what a renewal's answer says, without the times.
func outcome(r batchtest.Res) string {
	switch {
	case r.Err == nil:
		return "renewed"
	case errors.Is(r.Err, lease.ErrLost):
		return "lost"
	default:
		return "error: " + r.Err.Error()
	}
}

// TestRenewBatchMatchesRenew renews the same scenario twice, once by one
// RenewBatch and once by single Renews in order, and wants the same answer
// for every request; the renewed ones end ttl after the server's now.
func TestRenewBatchMatchesRenew(t *testing.T) {
	t.Parallel()
	batchStores(t, func(t *testing.T, _ *redis.Client, l *redislease.Locker, expire func(lease.Lease)) {
		ctx := context.Background()
		batch := batchScenario(t, l, "b/", expire)
		single := batchScenario(t, l, "s/", expire)
		before := time.Now()
		got := batchtest.RenewBatch(ctx, l, batch)
		if len(got) != len(batch) {
			t.Fatalf("RenewBatch returned %d results for %d requests", len(got), len(batch))
		}
		want := []string{"renewed", "lost", "lost", "lost", "renewed", "lost", "renewed"}
		for i, req := range single {
			var w batchtest.Res
			w.Lease, w.Err = l.Renew(ctx, req.Lease, req.TTL)
			g := got[i]
			gs, ws := outcome(g), outcome(w)
			if gs != ws {
				t.Errorf("request %d (%s): RenewBatch said %q, Renew said %q", i, req.Lease.Name, gs, ws)
			}
			if gs != want[i] {
				t.Errorf("request %d (%s): %q, want %s", i, req.Lease.Name, gs, want[i])
			}
			if g.Err == nil {
				b := batch[i].Lease
				if g.Lease.Name != b.Name || g.Lease.Owner != b.Owner || g.Lease.Token != b.Token || !g.Lease.Acquired.Equal(b.Acquired) {
					t.Errorf("request %d: renewed lease %+v does not keep the tenure of %+v", i, g.Lease, b)
				}
				if !g.Lease.Deadline.After(before.Add(req.TTL/2)) || g.Lease.Deadline.After(time.Now().Add(req.TTL)) {
					t.Errorf("request %d: Deadline %s is not about %s from now", i, g.Lease.Deadline, req.TTL)
				}
			}
		}
		// The tenure named twice was renewed last for one minute.
		info, err := l.Inspect(ctx, "b/twice")
		if err != nil || info.Expires.Sub(got[6].Lease.Expires).Abs() > 5*time.Millisecond || !info.Expires.Before(got[4].Lease.Expires) {
			t.Errorf("Inspect b/twice = %+v, %v; want the last renewal's expiry %s", info, err, got[6].Lease.Expires)
		}
	})
}

// TestRenewBatchRoundTrips counts round trips: 2500 renewals go in three
// pipelines of at most 1000, not 2500 calls.
func TestRenewBatchRoundTrips(t *testing.T) {
	t.Parallel()
	batchStores(t, func(t *testing.T, client *redis.Client, l *redislease.Locker, _ func(lease.Lease)) {
		ctx := context.Background()
		const n = 2500
		reqs := make([]batchtest.Req, n)
		// The leases are set up by concurrent Acquires, which share round
		// trips (the Locker's pipelines); only the RenewBatch is counted.
		const setters = 16
		var wg sync.WaitGroup
		for w := range setters {
			wg.Go(func() {
				for i := w; i < n; i += setters {
					ls, err := l.Acquire(ctx, fmt.Sprintf("trips/%d", i), "owner", time.Minute)
					if err != nil {
						t.Errorf("Acquire trips/%d: %v", i, err)
						return
					}
					reqs[i] = batchtest.Req{Lease: ls, TTL: time.Minute}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// Load the script, as the first Renew of a Locker does.
		if _, err := l.Renew(ctx, reqs[0].Lease, time.Minute); err != nil {
			t.Fatal(err)
		}
		h := &scriptTrips{}
		client.AddHook(h)
		res := batchtest.RenewBatch(ctx, l, reqs)
		trips, cmds := h.take()
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("request %d: %v", i, r.Err)
			}
		}
		if trips != 3 || cmds != n {
			t.Fatalf("%d renewals took %d round trips and %d script runs; want 3 and %d", n, trips, cmds, n)
		}
	})
}

// TestRenewBatchAfterScriptFlush: a server that lost its script cache
// answers the pipeline NOSCRIPT; those items go again as EVAL, in one
// more round trip, and are renewed. On a private miniredis: the shared
// server's cache is never flushed.
func TestRenewBatchAfterScriptFlush(t *testing.T) {
	t.Parallel()
	_, client, _ := newMiniredis(t)
	l := mustNew(t, client)
	ctx := context.Background()
	reqs := make([]batchtest.Req, 10)
	for i := range reqs {
		ls, err := l.Acquire(ctx, fmt.Sprintf("flush/%d", i), "owner", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		reqs[i] = batchtest.Req{Lease: ls, TTL: time.Minute}
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h := &scriptTrips{}
	client.AddHook(h)
	for i, r := range batchtest.RenewBatch(ctx, l, reqs) {
		if r.Err != nil {
			t.Fatalf("request %d after SCRIPT FLUSH: %v", i, r.Err)
		}
	}
	if trips, cmds := h.take(); trips != 2 || cmds != 20 {
		t.Fatalf("after SCRIPT FLUSH the batch took %d round trips and %d script runs; want 2 and 20: EVALSHA, then EVAL", trips, cmds)
	}
}

// TestRenewBatchOnDownStoreIsAnError: a store that cannot be reached is a
// store error for every request, never ErrLost.
func TestRenewBatchOnDownStoreIsAnError(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	mr, client, _ := newMiniredis(t)
	l := mustNew(t, client)
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "down/x", "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mr.Close()
	for i, r := range batchtest.RenewBatch(ctx, l, []batchtest.Req{{Lease: ls, TTL: time.Minute}, {Lease: ls, TTL: time.Minute}}) {
		if r.Err == nil || errors.Is(r.Err, lease.ErrLost) || errors.Is(r.Err, lease.ErrHeld) {
			t.Errorf("request %d on a stopped server: %v; want a store error", i, r.Err)
		}
	}
}

// TestRenewSweepScale, with LEASE_REDIS_SCALE=N (and LEASE_TEST_REDIS),
// holds N leases and renews them all once three ways: one Renew at a time,
// eight at a time, and RenewBatch in calls of 500 (as lease.Run's renewer
// sends them), logging the time and round trips of each.
func TestRenewSweepScale(t *testing.T) {
	raw := os.Getenv("LEASE_REDIS_SCALE")
	if raw == "" {
		t.Skip("set LEASE_REDIS_SCALE=N to measure a sweep of N renewals")
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		t.Fatalf("LEASE_REDIS_SCALE=%q: want a positive number", raw)
	}
	client, _ := realRedis(t, -1)
	prefix := randomPrefix("scale")
	deleteKeys(t, client, prefix)
	l := mustNew(t, client, redislease.WithPrefix(prefix))
	ctx := context.Background()
	reqs := make([]batchtest.Req, n)
	for i := range reqs {
		ls, err := l.Acquire(ctx, fmt.Sprintf("scale/%d", i), "owner", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		reqs[i] = batchtest.Req{Lease: ls, TTL: time.Minute}
	}
	h := &scriptTrips{}
	client.AddHook(h)
	measure := func(how string, sweep func()) {
		h.take()
		start := time.Now()
		sweep()
		took := time.Since(start)
		trips, _ := h.take()
		t.Logf("%-22s %6d renewals: %5d round trips, %v", how, n, trips, took.Round(time.Millisecond))
	}
	measure("one at a time", func() {
		for _, r := range reqs {
			if _, err := l.Renew(ctx, r.Lease, r.TTL); err != nil {
				t.Fatal(err)
			}
		}
	})
	measure("8 at a time", func() {
		sem := make(chan struct{}, 8)
		errs := make(chan error, n)
		for _, r := range reqs {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				_, err := l.Renew(ctx, r.Lease, r.TTL)
				errs <- err
			}()
		}
		for range 8 {
			sem <- struct{}{}
		}
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	measure("RenewBatch, 500 a call", func() {
		for from := 0; from < n; from += 500 {
			for _, r := range batchtest.RenewBatch(ctx, l, reqs[from:min(from+500, n)]) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
		}
	})
	measure("RenewBatch, one call", func() {
		for _, r := range batchtest.RenewBatch(ctx, l, reqs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	})
}
