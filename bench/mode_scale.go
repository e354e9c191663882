package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"runtime/metrics"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
)

// countingLocker counts the renewals that go through it, one by one or in
// batches. It has RenewBatch, renewing through the wrapped Locker's when it
// has one (every Locker of the lease module does), so Run batches as usual.
type countingLocker struct {
	lease.Locker
	renewals atomic.Int64 // tenures renewed or attempted
	calls    atomic.Int64 // Renew and RenewBatch calls
}

func (l *countingLocker) Renew(ctx context.Context, ls lease.Lease, ttl time.Duration) (lease.Lease, error) {
	l.renewals.Add(1)
	l.calls.Add(1)
	return l.Locker.Renew(ctx, ls, ttl)
}

func (l *countingLocker) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	l.renewals.Add(int64(len(leases)))
	l.calls.Add(1)
	if br, ok := l.Locker.(batcher); ok {
		return br.RenewBatch(ctx, leases, ttls)
	}
	out, errs := make([]lease.Lease, len(leases)), make([]error, len(leases))
	for i := range leases {
		out[i], errs[i] = l.Locker.Renew(ctx, leases[i], ttls[i])
	}
	return out, errs
}

// batcher is a Locker that renews many leases in one call, as
// driver.Locker.RenewBatch does and lease.Run uses.
type batcher interface {
	RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error)
}

// memSample reads the goroutine count and the bytes of live heap objects
// and goroutine stacks.
type memSample struct {
	goroutines uint64
	heap       uint64 // /memory/classes/heap/objects:bytes
	stacks     uint64 // /memory/classes/heap/stacks:bytes
}

func readMem() memSample {
	s := []metrics.Sample{
		{Name: "/sched/goroutines:goroutines"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
	metrics.Read(s)
	var m memSample
	if s[0].Value.Kind() == metrics.KindUint64 {
		m.goroutines = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		m.heap = s[1].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		m.stacks = s[2].Value.Uint64()
	}
	return m
}

// scaled is one run of n jobs.
type scaled struct {
	n                 int
	kept, lost, other int
	errs              map[string]int // other errors by message
	acquiredIn        time.Duration  // until every job held its lease or had failed
	peak              memSample
	perLease          float64 // bytes of heap and stacks per held lease
	renewals, calls   int64   // in the steady window
	trips             int64   // round trips (RPCs) in the steady window
	window            time.Duration
	every             time.Duration
}

// jobName matches a job's lease name in an error message.
var jobName = regexp.MustCompile(`"scale-[0-9]+"`)

// runScale runs cfg.scaleN concurrent lease.Run jobs per store on one
// Locker and reports what became of them and what they cost.
func runScale(ctx context.Context, cfg config, versions map[string]string, progress func(string)) *table {
	t := &table{
		title: fmt.Sprintf("scale: N concurrent lease.Run jobs on one Locker, ttl %s (renewal every %s), each holding %s",
			cfg.scaleTTL, cfg.scaleTTL/3, cfg.scaleHold),
		cols: []string{"store", "jobs", "kept", "lost", "other errors", "all acquired in", "peak goroutines", "peak heap", "memory per lease", "round trips per sweep", "renewals per call"},
	}
	t.note("kept: Run returned nil; lost: its error matched lease.ErrLost; other: any other error (below)")
	t.note("memory per lease: live heap and goroutine stacks while every job holds, minus before, over the jobs held (includes each job's goroutine)")
	t.note("round trips per sweep: the round trips (etcd: RPCs) counted while every job held, per renewal, times N: what renewing all N once costs; renewals per call: tenures per Renew or RenewBatch call")
	t.note("memory per lease and the sweep are shown only when every job held its lease throughout (— otherwise)")
	t.note("SQL: the Locker is sqllease.New on a pool of %d connections; Redis: redislease.Open's own client; all through a counting proxy", cfg.scalePool)
	for _, tg := range cfg.targets {
		for _, n := range cfg.scaleN {
			if ctx.Err() != nil {
				return t
			}
			progress(fmt.Sprintf("%s scale: %d jobs", tg.kind, n))
			o := connOpts{proxy: true, leaseURL: tg.kind == kindRedis, pool: cfg.scalePool}
			c, err := connectFor(ctx, tg, o, versions)
			if err != nil {
				t.add(tg.kind, fmt.Sprint(n), "error", "", "", "", "", "", "", "", "")
				t.note("%s", short(err))
				continue
			}
			s := scaleOnce(ctx, c, n, cfg.scaleTTL, cfg.scaleHold)
			perSweep, perCall, perLease := "—", "—", "—"
			if !math.IsNaN(s.perLease) {
				perLease = bytesIEC(s.perLease)
			}
			if s.renewals > 0 {
				perSweep = fmt.Sprintf("%.0f", float64(s.trips)/float64(s.renewals)*float64(n))
				perCall = fmt.Sprintf("%.1f", float64(s.renewals)/float64(max(s.calls, 1)))
			}
			t.add(c.label, group(int64(n)), group(int64(s.kept)), group(int64(s.lost)), group(int64(s.other)),
				s.acquiredIn.Round(10*time.Millisecond).String(), group(int64(s.peak.goroutines)), bytesIEC(float64(s.peak.heap)),
				perLease, perSweep, perCall)
			for _, e := range topErrors(s.errs, 3) {
				t.note("%s, %d jobs: %s", c.label, n, e)
			}
			c.close()
		}
	}
	return t
}

// scaleOnce starts n jobs at once on c's Locker and waits for them all.
func scaleOnce(ctx context.Context, c *storeConn, n int, ttl, hold time.Duration) scaled {
	l := &countingLocker{Locker: c.locker}
	s := scaled{n: n, errs: map[string]int{}, every: ttl / 3}
	runtime.GC()
	base := readMem()

	var (
		acquired, ended atomic.Int64
		mu              sync.Mutex
		wg              sync.WaitGroup
		peak            memSample
		sampleDone      = make(chan struct{})
		stopSampling    = make(chan struct{})
	)
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			m := readMem()
			mu.Lock()
			peak.goroutines = max(peak.goroutines, m.goroutines)
			peak.heap = max(peak.heap, m.heap)
			mu.Unlock()
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	jctx, cancel := context.WithTimeout(ctx, hold+2*ttl+time.Minute)
	defer cancel()
	start := time.Now()
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ended.Add(1)
			results[i] = lease.Run(jctx, l, fmt.Sprintf("scale-%d", i), ttl, func(ctx context.Context) error {
				acquired.Add(1)
				t := time.NewTimer(hold)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
				}
				return nil
			})
		}()
	}
	// Wait until every job holds its lease or has ended.
	for acquired.Load()+ended.Load() < int64(n) && jctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	s.acquiredIn = time.Since(start)
	// Memory while every job holds.
	runtime.GC()
	held := readMem()
	allHeld := func() bool { return acquired.Load() == int64(n) && ended.Load() == 0 }
	if allHeld() {
		s.perLease = (float64(held.heap+held.stacks) - float64(base.heap+base.stacks)) / float64(n)
	} else {
		s.perLease = math.NaN()
	}
	// Round trips over the steady window: from one renewal interval after
	// every job held until a second before the first jobs end.
	from := time.Now().Add(s.every)
	to := start.Add(hold - time.Second)
	if to.Sub(from) >= s.every {
		sleepUntil(jctx, from)
		trips0, ren0, calls0 := c.count(), l.renewals.Load(), l.calls.Load()
		sleepUntil(jctx, to)
		s.trips, s.renewals, s.calls = c.count()-trips0, l.renewals.Load()-ren0, l.calls.Load()-calls0
		s.window = to.Sub(from)
		if !allHeld() {
			// Jobs ended (lost) in the window: its renewals are not a sweep's.
			s.renewals = 0
		}
	}
	wg.Wait()
	close(stopSampling)
	<-sampleDone
	s.peak = peak
	for _, err := range results {
		switch {
		case err == nil:
			s.kept++
		case errors.Is(err, lease.ErrLost):
			s.lost++
			s.errs["lost: "+jobName.ReplaceAllString(short(err), `"scale-N"`)]++
		default:
			s.other++
			s.errs[jobName.ReplaceAllString(short(err), `"scale-N"`)]++
		}
	}
	return s
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// topErrors lists the k most frequent messages with their counts.
func topErrors(m map[string]int, k int) []string {
	type kv struct {
		msg string
		n   int
	}
	var all []kv
	for msg, n := range m {
		all = append(all, kv{msg, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].msg < all[j].msg })
	var out []string
	for i, e := range all {
		if i == k {
			out = append(out, fmt.Sprintf("and %d other messages", len(all)-k))
			break
		}
		out = append(out, fmt.Sprintf("%d× %s", e.n, e.msg))
	}
	return out
}
