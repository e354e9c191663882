package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// waiter is one way to wait for a busy name.
type waiter struct {
	name string
	how  string // what a waiting caller does
	// open readies one caller on name; run blocks until the caller holds
	// name (or gives up), calls fn while holding it, then releases it.
	open func(ctx context.Context, name string) (run func(ctx context.Context, fn func()) error, close func(), err error)
}

// plainLocker hides every optional interface of a Locker (Watcher,
// RenewBatch) and the line of waiters (its Acquire drops what the
// context carries), so Run's WithWait polls.
type plainLocker struct{ lease.Locker }

// Acquire acquires without the waiter's place that Run's context carries
// (a fresh context, with ctx's deadline).
func (p plainLocker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	bare, cancel := context.WithCancel(context.Background())
	if d, ok := ctx.Deadline(); ok {
		bare, cancel = context.WithDeadline(context.Background(), d)
	}
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return p.Locker.Acquire(bare, name, owner, ttl)
}

// leaseWaiter waits with lease.Run and opts on a Locker of its own per
// caller, made by mk, as callers in separate processes would have (the
// Lockers share the connection's client or pool, as the peers' callers
// do). hide hides the Locker's optional interfaces, so WithWait polls.
func leaseWaiter(name, how string, mk func() (lease.Locker, error), hide bool, ttl time.Duration, opts ...lease.RunOption) waiter {
	return waiter{name: name, how: how, open: func(ctx context.Context, key string) (func(context.Context, func()) error, func(), error) {
		l, err := mk()
		if err != nil {
			return nil, nil, err
		}
		var use lease.Locker = l
		if hide {
			use = plainLocker{l}
		}
		run := func(ctx context.Context, fn func()) error {
			return lease.Run(ctx, use, key, ttl, func(context.Context) error { fn(); return nil }, opts...)
		}
		return run, func() { _ = l.Close() }, nil
	}}
}

// sharedWaiter waits with lease.Run and opts, every caller on the one
// Locker l: callers in one process, which take turns in the Locker
// before they ask the store.
func sharedWaiter(name, how string, l lease.Locker, ttl time.Duration, opts ...lease.RunOption) waiter {
	return waiter{name: name, how: how, open: func(ctx context.Context, key string) (func(context.Context, func()) error, func(), error) {
		run := func(ctx context.Context, fn func()) error {
			return lease.Run(ctx, l, key, ttl, func(context.Context) error { fn(); return nil }, opts...)
		}
		return run, func() {}, nil
	}}
}

// watches reports how lease's WithWait waits on l: with the store's
// notifications when l is a driver.Watcher whose Watch works, else by polling.
func watches(ctx context.Context, l lease.Locker) (bool, string) {
	w, ok := l.(driver.Watcher)
	if !ok {
		return false, "polls (the Locker is not a driver.Watcher)"
	}
	watch, err := w.Watch(ctx, "handoff-probe")
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return false, "polls with jittered backoff (this store cannot notify: Watch is unsupported)"
	case err != nil:
		return false, "polls (Watch failed: " + short(err) + ")"
	}
	watch.Stop()
	if fair(ctx, l) {
		return true, "the store's line of waiters: a release wakes the waiting Locker whose mark is oldest"
	}
	return true, "woken by the store's notifications, every waiting Locker at each release (driver.Watcher)"
}

// fair reports whether l keeps a line of waiters, for WithFairWait: a
// fair Run of a free name then succeeds, and otherwise fails at once.
func fair(ctx context.Context, l lease.Locker) bool {
	err := lease.Run(ctx, l, "handoff-probe", 10*time.Second, func(context.Context) error { return nil }, lease.WithFairWait(0))
	return err == nil
}

// handoffWaiters are lease's ways to wait and each peer's on c's store;
// the first is lease.Run WithWait on the Locker as it is.
func handoffWaiters(ctx context.Context, cfg config, c *storeConn, t *table) []waiter {
	ttl, limit := cfg.ttl, cfg.waitLimit
	notified, how := watches(ctx, c.locker)
	mk := c.newLocker
	out := []waiter{leaseWaiter("lease WithWait", "lease.Run WithWait, a Locker per caller (as separate processes): "+how, mk, false, ttl, lease.WithWait(limit))}
	if notified {
		out = append(out, leaseWaiter("lease WithWait, polling", "lease.Run WithWait, a Locker per caller with its Watch hidden: polls with jittered backoff from 10ms doubling to 1s", mk, true, ttl, lease.WithWait(limit)))
	}
	if fair(ctx, c.locker) {
		out = append(out, leaseWaiter("lease WithFairWait", "lease.Run WithFairWait, a Locker per caller: the store's line of waiters, in arrival order", mk, false, ttl, lease.WithFairWait(limit)))
	} else {
		t.note("%s: lease WithFairWait not measured: this store keeps no line of waiters (WithFairWait is unsupported)", c.label)
	}
	out = append(out, sharedWaiter("lease WithWait, one Locker", "lease.Run WithWait, every caller on one Locker (one process): callers take turns in the Locker, and only the first asks the store", c.locker, ttl, lease.WithWait(limit)))
	switch c.kind {
	case kindRedis:
		client := redislock.New(c.redis)
		pfx := c.redisPrefix() + "redislock:"
		for _, s := range []struct {
			name, how string
			strategy  func() redislock.RetryStrategy
		}{
			{"bsm/redislock, linear 10ms", "Obtain with LinearBackoff(10ms): a try every 10ms", func() redislock.RetryStrategy { return redislock.LinearBackoff(10 * time.Millisecond) }},
			{"bsm/redislock, exponential 16ms–1s", "Obtain with ExponentialBackoff(16ms, 1s): tries after 16, 16, 16, 32, 64 ... 1024ms", func() redislock.RetryStrategy { return redislock.ExponentialBackoff(16*time.Millisecond, time.Second) }},
		} {
			out = append(out, waiter{name: s.name, how: s.how, open: func(ctx context.Context, key string) (func(context.Context, func()) error, func(), error) {
				run := func(ctx context.Context, fn func()) error {
					ctx, cancel := context.WithTimeout(ctx, limit)
					defer cancel()
					lk, err := client.Obtain(ctx, pfx+key, ttl, &redislock.Options{RetryStrategy: s.strategy()})
					if err != nil {
						return err
					}
					fn()
					return lk.Release(context.WithoutCancel(ctx))
				}
				return run, func() {}, nil
			}})
		}
		rs := redsync.New(goredis.NewPool(c.redis))
		rpfx := c.redisPrefix() + "redsync:"
		out = append(out, waiter{name: "go-redsync/redsync, default tries", how: "Lock with redsync's defaults: up to 32 tries, 50–250ms apart (random)", open: func(ctx context.Context, key string) (func(context.Context, func()) error, func(), error) {
			run := func(ctx context.Context, fn func()) error {
				m := rs.NewMutex(rpfx+key, redsync.WithExpiry(ttl))
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				fn()
				_, err := m.UnlockContext(context.WithoutCancel(ctx))
				return err
			}
			return run, func() {}, nil
		}})
	case kindEtcd:
		pfx := c.etcdPrefix() + "mutex/"
		out = append(out, waiter{name: "concurrency.Mutex", how: "Mutex.Lock on a Session each: a Txn, then a watch on the key created just before its own", open: func(ctx context.Context, key string) (func(context.Context, func()) error, func(), error) {
			s, err := concurrency.NewSession(c.etcd, concurrency.WithTTL(int(ttlSeconds(ttl))), concurrency.WithContext(context.WithoutCancel(ctx)))
			if err != nil {
				return nil, nil, err
			}
			run := func(ctx context.Context, fn func()) error {
				m := concurrency.NewMutex(s, pfx+key)
				if err := m.Lock(ctx); err != nil {
					return err
				}
				fn()
				return m.Unlock(context.WithoutCancel(ctx))
			}
			return run, func() { _ = s.Close() }, nil
		}})
	}
	return out
}

// handedOff is what one or more handoff runs of one waiter measured.
type handedOff struct {
	latencies []time.Duration
	ops       int64 // store operations (round trips; etcd RPCs) while handing off
	handoffs  int
	overlaps  int64
	failed    int
	firstErr  error
}

// handoff runs one chain: a holder holds name while n callers start
// waiting for it, then releases; each caller, once it holds the name,
// records the time since the previous holder's fn returned (its release
// comes right after), holds for hold and returns.
func handoff(ctx context.Context, w waiter, name string, n int, hold, settle time.Duration, count func() int64) (h handedOff) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	base := time.Now()
	var (
		lastEnd atomic.Int64 // since base, when the latest holder's fn returned
		holders atomic.Int64
		mu      sync.Mutex
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		h.failed++
		if h.firstErr == nil {
			h.firstErr = err
		}
	}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	runs := make([]func(context.Context, func()) error, n+1)
	for i := range runs {
		run, closeFn, err := w.open(ctx, name)
		if err != nil {
			fail(err)
			return h
		}
		runs[i], closers = run, append(closers, closeFn)
	}
	holding, release := make(chan struct{}), make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := runs[0](ctx, func() {
			close(holding)
			<-release
			lastEnd.Store(int64(time.Since(base)))
		})
		if err != nil {
			fail(fmt.Errorf("first holder: %w", err))
		}
	}()
	select {
	case <-holding:
	case <-ctx.Done():
		fail(errors.New("the first holder never got the name"))
		wg.Wait()
		return h
	}
	for _, run := range runs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := run(ctx, func() {
				if holders.Add(1) != 1 {
					mu.Lock()
					h.overlaps++
					mu.Unlock()
				}
				lat := time.Duration(int64(time.Since(base)) - lastEnd.Load())
				mu.Lock()
				h.latencies = append(h.latencies, lat)
				mu.Unlock()
				time.Sleep(hold)
				holders.Add(-1)
				lastEnd.Store(int64(time.Since(base)))
			})
			if err != nil {
				fail(err)
			}
		}()
	}
	// Let every caller reach its wait.
	sleepUntil(ctx, time.Now().Add(settle))
	before := count()
	close(release)
	wg.Wait()
	h.ops = count() - before
	h.handoffs = len(h.latencies)
	return h
}

// percentile is the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// runHandoff measures handoff latency and store operations per handoff
// for lease's ways to wait and each peer's, interleaved rounds.
func runHandoff(ctx context.Context, cfg config, versions map[string]string, progress func(string)) *table {
	t := &table{
		title: fmt.Sprintf("handoff: %d waiters on one name, each holding %s; latency from a holder's fn returning (its release follows) to the next holder's fn starting, p50/p99 over %s; store operations (round trips through a counting proxy; etcd: RPCs) per handoff; ratio = peer p50 / lease p50, >1 means lease hands off sooner",
			cfg.waiters, cfg.handoffHold, plural(cfg.rounds, "round")),
		cols: compareCols,
	}
	for _, tg := range cfg.targets {
		c, err := connectFor(ctx, tg, connOpts{proxy: true, leaseURL: true, pool: cfg.waiters + 4}, versions)
		if err != nil {
			t.add(tg.kind, "handoff", "error", "", "")
			t.note("%s", short(err))
			continue
		}
		ws := handoffWaiters(ctx, cfg, c, t)
		res := make([]handedOff, len(ws))
		interleave(cfg.rounds, len(ws), func(r, i int) {
			got := handoff(ctx, ws[i], fmt.Sprintf("handoff-r%d-%d", r, i), cfg.waiters, cfg.handoffHold, 300*time.Millisecond, c.count)
			s := &res[i]
			s.latencies = append(s.latencies, got.latencies...)
			s.ops += got.ops
			s.handoffs += got.handoffs
			s.overlaps += got.overlaps
			s.failed += got.failed
			s.firstErr = cmpErr(s.firstErr, got.firstErr)
		}, func(r int) { progress(fmt.Sprintf("%s handoff: round %d/%d", c.kind, r+1, cfg.rounds)) })
		cellOf := func(s handedOff) string {
			if s.handoffs == 0 {
				return "no handoff"
			}
			out := fmt.Sprintf("p50 %s, p99 %s, %.1f ops", ms(percentile(s.latencies, 50)), ms(percentile(s.latencies, 99)), float64(s.ops)/float64(s.handoffs))
			if s.failed > 0 {
				out += fmt.Sprintf(", %d failed", s.failed)
			}
			return out
		}
		op := fmt.Sprintf("handoff, %d waiters", cfg.waiters)
		for i := 1; i < len(ws); i++ {
			t.add(c.label, op, cellOf(res[0]), ws[i].name+": "+cellOf(res[i]),
				ratio(float64(percentile(res[i].latencies, 50)), float64(percentile(res[0].latencies, 50))))
		}
		if len(ws) == 1 {
			t.add(c.label, op, cellOf(res[0]), "—", "—")
		}
		for i, w := range ws {
			t.note("%s %s: %s", c.label, w.name, w.how)
			s := res[i]
			if s.overlaps > 0 {
				t.note("%s %s: VIOLATIONS: %d overlapping holders", c.label, w.name, s.overlaps)
			}
			if s.firstErr != nil {
				t.note("%s %s: %d callers failed; first: %s", c.label, w.name, s.failed, short(s.firstErr))
			}
		}
		c.close()
	}
	return t
}
