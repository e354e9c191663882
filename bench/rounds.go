package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// contender is one implementation of one operation on one store: lease,
// or a peer, or a floor.
type contender struct {
	impl  string // "lease", "bsm/redislock", ...
	ref   bool   // a reference that is not a lease (session locks)
	perOp string // what one operation sends to the store

	// prepare readies one worker, whose names are derived from name, and
	// returns the operation it repeats and what ends the worker's state
	// (releasing what prepare holds). It runs before the clock starts.
	prepare func(ctx context.Context, name string) (step func(context.Context) error, done func(), err error)
}

// result is a contender's median over rounds.
type result struct {
	c       contender
	opsPerS float64 // median of the rounds
	rounds  []float64
	failed  int64  // steps that returned an error
	err     error  // why it was not measured, or its first failed step
	skipped bool   // not measured: its warm-up could not prepare
	cpu     cpuUse // summed over the rounds
}

// measure runs each contender with workers workers for d per round, for
// rounds rounds, rotating their order every round so that none always
// runs first (interleaved rounds on the same servers), after a short
// warm-up of each, and returns each one's median ops/s and the CPU time
// its rounds cost, read by cpu.
func measure(ctx context.Context, label string, cs []contender, workers, rounds int, d time.Duration, cpu *cpuMeter, progress func(string)) []result {
	res := make([]result, len(cs))
	for i, c := range cs {
		res[i].c = c
		warm := min(d/4, 250*time.Millisecond)
		if t := runTimed(ctx, c, label+"-warm", workers, warm, nil); t.prepErr != nil {
			res[i].skipped, res[i].err = true, t.prepErr
		}
	}
	interleave(rounds, len(cs), func(r, i int) {
		if res[i].skipped {
			return
		}
		t := runTimed(ctx, cs[i], fmt.Sprintf("%s-r%d", label, r), workers, d, cpu)
		res[i].failed += t.failed
		res[i].cpu.add(t.cpu)
		if res[i].err == nil {
			res[i].err = cmpErr(t.prepErr, t.stepErr)
		}
		res[i].rounds = append(res[i].rounds, t.opsPerS)
	}, func(r int) { progress(fmt.Sprintf("%s: round %d/%d", label, r+1, rounds)) })
	for i := range res {
		res[i].opsPerS = median(res[i].rounds)
	}
	return res
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// timed is one run of one contender.
type timed struct {
	opsPerS float64
	failed  int64
	stepErr error // the first failed step
	prepErr error // prepare failed: nothing ran
	cpu     cpuUse
}

// runTimed prepares workers workers of c, runs their steps for d, ends
// them, and returns the completed operations per second and, with cpu,
// the CPU time the steps cost (not prepare's or the ending's).
func runTimed(ctx context.Context, c contender, label string, workers int, d time.Duration, cpu *cpuMeter) (t timed) {
	steps := make([]func(context.Context) error, workers)
	dones := make([]func(), 0, workers)
	defer func() {
		for _, done := range dones {
			done()
		}
	}()
	for w := range workers {
		step, done, err := c.prepare(ctx, fmt.Sprintf("%s-w%d", label, w))
		if err != nil {
			t.prepErr = fmt.Errorf("prepare: %w", err)
			return t
		}
		steps[w] = step
		dones = append(dones, done)
	}
	var (
		ops, errs atomic.Int64
		errOnce   sync.Once
	)
	var stop func(int64) cpuUse
	if cpu != nil {
		stop = cpu.start(ctx)
	}
	elapsed := runWorkers(ctx, d, workers, func(ctx context.Context, w int, stopped func() bool) {
		for !stopped() {
			if err := steps[w](ctx); err != nil {
				errs.Add(1)
				errOnce.Do(func() { t.stepErr = err })
				time.Sleep(time.Millisecond) // no hot loop on a failing store
				continue
			}
			ops.Add(1)
		}
	})
	if stop != nil {
		t.cpu = stop(ops.Load())
	}
	t.opsPerS = float64(ops.Load()) / elapsed.Seconds()
	t.failed = errs.Load()
	return t
}

// interleave calls f for every round r and contender i, rotating the
// contenders' order every round so that none always runs first, and
// roundDone after each round.
func interleave(rounds, n int, f func(r, i int), roundDone func(r int)) {
	for r := range rounds {
		for k := range n {
			f(r, (k+r)%n)
		}
		roundDone(r)
	}
}

// runWorkers runs n workers together for d (or until ctx ends): each
// runs body, which must loop until stopped reports true. It returns how
// long they ran, from their common start until the last one returned.
// Their context ends 30s after d at the latest, so a store that hangs
// cannot hold them forever.
func runWorkers(ctx context.Context, d time.Duration, n int, body func(ctx context.Context, w int, stopped func() bool)) time.Duration {
	rctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	stopped := func() bool { return stop.Load() || rctx.Err() != nil }
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			body(rctx, w, stopped)
		}()
	}
	t0 := time.Now()
	close(start)
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	stop.Store(true)
	wg.Wait()
	return time.Since(t0)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
