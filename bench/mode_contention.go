package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// contended is one run of one impl in the contention mode.
type contended struct {
	tenures    int64 // acquire, hold, release completed
	failed     int64 // calls that returned an error
	overlaps   int64 // a holder found another holder
	stale      int64 // a fenced write whose fence was not above every earlier one
	elapsed    time.Duration
	firstError error
}

// fence is a fenced register: it accepts a write only with a fence above
// every fence written before, as a fenced store would.
type fence struct {
	mu  sync.Mutex
	max int64
	set bool
}

func (f *fence) write(v int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set && v <= f.max {
		return false
	}
	f.max, f.set = v, true
	return true
}

// contend runs n workers of m on one name for d: each tries to acquire,
// and when it holds the name counts itself in (a second holder is an
// overlap), writes its fence, holds for hold, counts itself out and
// releases; a busy try waits a random time up to hold and tries again.
func contend(ctx context.Context, m impl, name string, n int, d, hold time.Duration) contended {
	var (
		res                              contended
		holders                          atomic.Int64
		tenures, failed, overlaps, stale atomic.Int64
		reg                              fence
		errOnce                          sync.Once
	)
	fail := func(err error) {
		failed.Add(1)
		errOnce.Do(func() { res.firstError = err })
	}
	handles := make([]*handle, 0, n)
	defer func() {
		for _, h := range handles {
			h.Close()
		}
	}()
	for range n {
		h, err := m.open(ctx, name)
		if err != nil {
			fail(err)
			res.failed = failed.Load()
			return res
		}
		handles = append(handles, h)
	}
	res.elapsed = runWorkers(ctx, d, n, func(ctx context.Context, w int, stopped func() bool) {
		h := handles[w]
		for !stopped() {
			f, ok, err := h.try(ctx)
			if err != nil {
				fail(err)
				time.Sleep(time.Millisecond)
				continue
			}
			if !ok {
				time.Sleep(time.Duration(rand.Int64N(int64(hold) + 1)))
				continue
			}
			if holders.Add(1) != 1 {
				overlaps.Add(1)
			}
			if m.fenced && !reg.write(f) {
				stale.Add(1)
			}
			time.Sleep(hold)
			holders.Add(-1)
			if err := h.release(ctx); err != nil {
				fail(fmt.Errorf("release: %w", err))
				continue
			}
			tenures.Add(1)
		}
	})
	res.tenures, res.failed, res.overlaps, res.stale = tenures.Load(), failed.Load(), overlaps.Load(), stale.Load()
	return res
}

// runContention runs lease and each peer with cfg.contenders workers on
// one name per store, interleaved rounds, and reports the median tenures
// per second and every violation of mutual exclusion seen.
func runContention(ctx context.Context, cfg config, versions map[string]string, progress func(string)) *table {
	t := &table{
		title: fmt.Sprintf("contention: %d workers on one name, each acquire, hold %s, release (a busy try waits up to %s); tenures/s (median of %s of %s); ratio = lease/peer",
			cfg.contenders, cfg.hold, cfg.hold, plural(cfg.rounds, "round"), cfg.dur),
		cols: compareCols,
	}
	t.note("violations: a holder that found another holder in process (overlap), or a fenced write whose token was not above every earlier one (stale); both must be 0")
	for _, tg := range cfg.targets {
		c, err := connectFor(ctx, tg, connOpts{pool: 2 * cfg.contenders}, versions)
		if err != nil {
			t.add(tg.kind, "contention", "error", "", "")
			t.note("%s", short(err))
			continue
		}
		var ms []impl
		for _, m := range storeImpls(c, cfg.ttl) {
			if m.does["cycle"] != "" {
				ms = append(ms, m)
			}
		}
		rates := make([][]float64, len(ms))
		sums := make([]contended, len(ms))
		interleave(cfg.rounds, len(ms), func(r, i int) {
			got := contend(ctx, ms[i], fmt.Sprintf("contention-r%d-%d", r, i), cfg.contenders, cfg.dur, cfg.hold)
			rates[i] = append(rates[i], float64(got.tenures)/max(got.elapsed, time.Nanosecond).Seconds())
			s := &sums[i]
			s.tenures += got.tenures
			s.failed += got.failed
			s.overlaps += got.overlaps
			s.stale += got.stale
			s.firstError = cmpErr(s.firstError, got.firstError)
		}, func(r int) { progress(fmt.Sprintf("%s contention: round %d/%d", c.kind, r+1, cfg.rounds)) })
		cellOf := func(i int) string {
			s := sums[i]
			out := fmt.Sprintf("%s, %d violations", rate(median(rates[i])), s.overlaps+s.stale)
			if s.failed > 0 {
				out += fmt.Sprintf(", %d failed", s.failed)
			}
			return out
		}
		op := fmt.Sprintf("%d on one name", cfg.contenders)
		for i := 1; i < len(ms); i++ {
			t.add(c.label, op, cellOf(0), ms[i].name+": "+cellOf(i), ratio(median(rates[0]), median(rates[i])))
		}
		for i, m := range ms {
			s := sums[i]
			if s.overlaps+s.stale > 0 {
				t.note("%s %s: VIOLATIONS: %d overlaps, %d stale fenced writes in %d tenures", c.label, m.name, s.overlaps, s.stale, s.tenures)
			}
			if s.firstError != nil {
				t.note("%s %s: %d failed calls; first: %s", c.label, m.name, s.failed, short(s.firstError))
			}
			if !m.fenced {
				t.note("%s %s: no fencing token, so only overlaps are checked", c.label, m.name)
			}
		}
		c.close()
	}
	return t
}
