package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// The renewals of all Runs on one Locker go through one renewer, kept in
// the Locker itself (see sharer), so that no process-wide state is keyed
// by Locker: it wakes
// when the earliest renewal falls due, takes every renewal due within an
// eighth of its interval (and none before one is due), most urgent (earliest Deadline) first, and sends
// them as one RenewBatch call (see batchRenewer) per maxBatch tenures. A lone Run renews
// every ttl/3 as it always did; ten thousand Runs cost a few calls per
// sweep instead of ten thousand. The renewer's goroutine lives while at
// least one Run uses it.

// maxBatch bounds one RenewBatch call.
const maxBatch = 500

// maxCalls bounds the RenewBatch calls of one sweep under way at once.
const maxCalls = 4

// fallbackRenewals bounds the Renew calls a renewer makes at once on a
// Locker that is not a batchRenewer.
const fallbackRenewals = 8

// sharer is a Locker that keeps what the Runs on it share: Shared
// returns the value stored under key, storing make() first when there is
// none. Every Locker of this module is one (driver.Locker), and so is
// otellease's wrapper; the Runs on any other Locker each renew on their
// own.
type sharer interface {
	Shared(key any, make func() any) any
}

// renewerSlot is what Run keeps in a sharer: its renewer while any Run
// uses it, guarded by mu.
type renewerSlot struct {
	mu sync.Mutex
	r  *renewer
}

type renewerKey struct{}

// renewJob is one Run's renewals.
type renewJob struct {
	ctx     context.Context // fn's context: once it ends, renew no more
	h       *holding
	ttl     time.Duration
	every   time.Duration
	log     *runLog
	lost    func(error)     // ends fn's context with a cause matching ErrLost
	renewed func(got Lease) // moves the watchdog to the new Deadline

	// Guarded by the renewer's mu.
	next     time.Time // when the next renewal falls due
	inflight bool      // in a call to the store now
	over     bool      // lost: renew no more
}

type renewer struct {
	l    Locker
	wake chan struct{} // a job was added, or the last one left
	done chan struct{} // closed when the loop has returned

	mu      sync.Mutex
	idle    *sync.Cond // signalled when a call's results are in
	jobs    map[*renewJob]struct{}
	closing bool
}

// startRenewing adds j to l's renewer, starting it if need be, and returns
// the function that takes j out again; once that returns, no renewal of
// j is in flight or will start.
func startRenewing(l Locker, j *renewJob) (stop func()) {
	slot := &renewerSlot{} // a Run's own, on a Locker that keeps nothing
	if sh, ok := l.(sharer); ok {
		if v, ok := sh.Shared(renewerKey{}, func() any { return &renewerSlot{} }).(*renewerSlot); ok {
			slot = v
		}
	}
	slot.mu.Lock()
	r := slot.r
	if r == nil {
		r = &renewer{l: l, wake: make(chan struct{}, 1), done: make(chan struct{}), jobs: map[*renewJob]struct{}{}}
		r.idle = sync.NewCond(&r.mu)
		slot.r = r
		go r.loop()
	}
	r.mu.Lock()
	j.next = j.nextAfter(j.h.get())
	r.jobs[j] = struct{}{}
	r.mu.Unlock()
	slot.mu.Unlock()
	r.poke()

	return func() {
		r.mu.Lock()
		j.over = true // never picked again
		for j.inflight {
			r.idle.Wait()
		}
		r.mu.Unlock()
		slot.mu.Lock()
		r.mu.Lock()
		delete(r.jobs, j)
		last := len(r.jobs) == 0
		if last {
			r.closing = true
			slot.r = nil
		}
		r.mu.Unlock()
		slot.mu.Unlock()
		if last {
			r.poke()
			<-r.done
		}
	}
}

// nextAfter is when the renewal after one that granted l falls due: every
// (±10%) after the request that granted it was sent, which is where l's
// Deadline is counted from. A grant that took long to answer (a queue of
// Acquires on a busy store) is renewed sooner, not every after its answer,
// which could be past its Deadline.
func (j *renewJob) nextAfter(l Lease) time.Time {
	sent := l.Deadline.Add(-(j.ttl - DriftMargin(j.ttl)))
	key := l.Expires
	if key.IsZero() {
		key = l.Deadline
	}
	return sent.Add(jitter(j.every, key))
}

// jitter spreads renewals over ±10% of every, so that Runs started
// together do not renew in waves. The spread is a hash of the lease's
// Expires (its Deadline when the store gives none), not a fresh draw:
// leases with one Expires (those one etcd batch renewal renewed, or the
// tenures of one shared etcd grant) stay due together and go in one call
// again, so that a store that renews them with one request (etcd's groups
// of tenures on one lease) goes on doing so, while leases granted apart,
// whose Expires differ, spread as if drawn at random.
func jitter(every time.Duration, key time.Time) time.Duration {
	h := uint64(key.UnixNano()) + 0x9e3779b97f4a7c15 // splitmix64
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	h ^= h >> 31
	return every - every/10 + time.Duration(h%uint64(every/5+1))
}

// chunks splits due, sorted by Deadline, into calls of maxBatch leases,
// each stretched (up to twice that) rather than split between leases
// next to each other that share an Expires, or else cut before them.
func chunks(due []*renewJob) [][]*renewJob {
	var out [][]*renewJob
	for len(due) > 0 {
		same := func(i int) bool { return due[i].h.get().Expires.Equal(due[i-1].h.get().Expires) }
		n := min(maxBatch, len(due))
		for n < len(due) && n < 2*maxBatch && same(n) {
			n++
		}
		if n < len(due) && same(n) {
			// Still inside a run at twice the size: cut before the run,
			// which the next call then carries whole.
			m := n - 1
			for m > 0 && same(m) {
				m--
			}
			if m > 0 {
				n = m
			}
		}
		out, due = append(out, due[:n]), due[n:]
	}
	return out
}

func (r *renewer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *renewer) loop() {
	defer close(r.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.mu.Lock()
		if r.closing {
			r.mu.Unlock()
			return
		}
		now := time.Now()
		due, wait := r.due(now)
		for _, j := range due {
			j.inflight = true
		}
		r.mu.Unlock()
		if len(due) == 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-r.wake:
				if !t.Stop() {
					select {
					case <-t.C:
					default:
					}
				}
			}
			continue
		}
		// The calls of one sweep go out together (up to maxCalls): one
		// after another, a store slowed by load would take the sum of
		// their times, and the last chunk's Deadlines could pass first.
		var wg sync.WaitGroup
		calls := make(chan struct{}, maxCalls)
		for _, chunk := range chunks(due) {
			calls <- struct{}{}
			wg.Go(func() {
				defer func() { <-calls }()
				r.renew(chunk)
			})
		}
		wg.Wait()
	}
}

// due returns the jobs to renew now, most urgent first, or, when none is
// due, how long until the first is. Nothing is sent until some renewal
// is due; then those due within an eighth of their interval go along.
// Taking along whatever is merely within reach whenever the loop comes
// round would, behind a call that takes a round trip, send a stream of
// small calls, each carrying what came within reach during the last one.
// r.mu must be held.
func (r *renewer) due(now time.Time) ([]*renewJob, time.Duration) {
	var near []*renewJob
	first := time.Duration(1<<63 - 1)
	for j := range r.jobs {
		if j.inflight || j.over || j.ctx.Err() != nil {
			continue
		}
		left := j.next.Sub(now)
		first = min(first, left)
		if left <= j.every/8 {
			near = append(near, j)
		}
	}
	if first > 0 {
		return nil, min(first, time.Hour)
	}
	// Leases that share an Expires with one going now go along, even if
	// not yet near: the tenures of one shared etcd grant, acquired a
	// little apart, are renewed together from the first sweep on.
	with := map[int64]bool{}
	for _, j := range near {
		if e := j.h.get().Expires; !e.IsZero() {
			with[e.UnixNano()] = true
		}
	}
	for j := range r.jobs {
		if e := j.h.get().Expires; !e.IsZero() && with[e.UnixNano()] && !j.inflight && !j.over && j.ctx.Err() == nil && j.next.Sub(now) > j.every/8 {
			near = append(near, j)
		}
	}
	slices.SortFunc(near, func(a, b *renewJob) int { return a.h.get().Deadline.Compare(b.h.get().Deadline) })
	return bunch(near), 0
}

// bunch reorders jobs, sorted by Deadline, so that those that share an
// Expires are next to each other, at the place of the most urgent of
// them: chunks then keep them in one call.
func bunch(jobs []*renewJob) []*renewJob {
	at := map[int64]int{} // Expires → index into buckets
	var buckets [][]*renewJob
	for _, j := range jobs {
		e := j.h.get().Expires
		if e.IsZero() {
			buckets = append(buckets, []*renewJob{j})
			continue
		}
		i, ok := at[e.UnixNano()]
		if !ok {
			i = len(buckets)
			at[e.UnixNano()] = i
			buckets = append(buckets, nil)
		}
		buckets[i] = append(buckets[i], j)
	}
	if len(buckets) == len(jobs) {
		return jobs
	}
	out := jobs[:0:0]
	for _, b := range buckets {
		out = append(out, b...)
	}
	return out
}

// renew renews chunk in one call (or a few, without batchRenewer) bounded
// by the latest of their Deadlines, and applies the results.
func (r *renewer) renew(chunk []*renewJob) {
	leases := make([]Lease, len(chunk))
	ttls := make([]time.Duration, len(chunk))
	var deadline time.Time
	for i, j := range chunk {
		leases[i], ttls[i] = j.h.get(), j.ttl
		if d := leases[i].Deadline; d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	renewed, errs := renewAll(ctx, r.l, leases, ttls)
	cancel()

	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, j := range chunk {
		j.inflight = false
		switch err := errs[i]; {
		case err == nil:
			j.h.set(renewed[i])
			j.renewed(renewed[i])
			j.next = j.nextAfter(renewed[i])
			j.log.log(slog.LevelDebug, "lease renewed", slog.Duration("lease.slack", leases[i].Deadline.Sub(now)))
		case errors.Is(err, ErrLost):
			j.over = true
			err := fmt.Errorf("lease %q: renewal: %w", leases[i].Name, err)
			j.log.log(slog.LevelError, "lease lost", slog.Any("error", err))
			j.lost(err)
		default:
			// The store failed; try again soon, while the Deadline lasts
			// (the watchdog ends fn's context at the Deadline).
			j.next = now.Add(max(j.every/4, time.Millisecond))
			j.log.log(slog.LevelWarn, "lease renewal failed; retrying", slog.Any("error", err), slog.Duration("lease.left", leases[i].Deadline.Sub(now)))
		}
	}
	r.idle.Broadcast()
}

// batchRenewer is a Locker that renews many leases in one call:
// leases[i] for ttls[i], each exactly as Renew would, with one result per
// lease, in order. Every Locker of this module is one (see
// driver.Locker.RenewBatch), and so is otellease's wrapper over one; a
// Locker that is not, or whose Can says no (otellease's wrapper over a
// Locker without it), is renewed a few Renew calls at a time.
type batchRenewer interface {
	RenewBatch(ctx context.Context, leases []Lease, ttls []time.Duration) ([]Lease, []error)
}

// renewAll renews leases[i] for ttls[i] on l: in one call when l is a
// batchRenewer, else a few Renew calls at a time.
func renewAll(ctx context.Context, l Locker, leases []Lease, ttls []time.Duration) ([]Lease, []error) {
	if br, ok := l.(batchRenewer); ok && Can[batchRenewer](l) {
		out, errs := br.RenewBatch(ctx, leases, ttls)
		if len(out) == len(leases) && len(errs) == len(leases) {
			return out, errs
		}
		err := fmt.Errorf("lease: %T.RenewBatch returned the wrong number of results", l)
		out, errs = make([]Lease, len(leases)), make([]error, len(leases))
		for i := range errs {
			errs[i] = err
		}
		return out, errs
	}
	out, errs := make([]Lease, len(leases)), make([]error, len(leases))
	sem := make(chan struct{}, fallbackRenewals)
	var wg sync.WaitGroup
	for i := range leases {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = l.Renew(ctx, leases[i], ttls[i])
		}()
	}
	wg.Wait()
	return out, errs
}
