// Command jobs is the worker loop of a job framework, with the two kinds
// of exclusivity such frameworks offer, built on leases:
//
//   - an exclusive job class runs one job at a time: lease "job:<class>";
//   - jobs with a concurrency key run one at a time per key, whatever
//     their class: lease "key:<key>".
//
// A job that finds a lease busy is deferred by min(remaining, 30s): the
// holder will be done by then, or its lease will have expired. That is not
// a failure, so it does not use up one of the job's retries. A job whose
// lease is lost mid-run (the store lost it, or an operator forced it free)
// is logged and counted: another worker may have run it at the same time.
// The job itself still counts as completed: it ran to its end, and its
// writes should be fenced with the lease's token anyway.
//
// Two workers share one memory store here; give workers on several
// machines one store URL and they share the work the same way.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

func main() {
	stats, err := run(context.Background(), os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", stats)
}

// Job is one unit of work.
type Job struct {
	ID        int
	Class     string
	Exclusive bool   // one job of Class at a time
	Key       string // one job with this concurrency key at a time
	Work      func(ctx context.Context) error

	attempts int
}

// leaseNames are the leases a job must hold while it runs, in a fixed
// order.
func (j *Job) leaseNames() []string {
	var names []string
	if j.Exclusive {
		names = append(names, "job:"+j.Class)
	}
	if j.Key != "" {
		names = append(names, "key:"+j.Key)
	}
	sort.Strings(names)
	return names
}

// Stats counts what happened to the jobs.
type Stats struct {
	Completed, Deferred, Retried, Failed, Lost int
}

// maxAttempts is how often a failing job runs before it is given up.
const maxAttempts = 3

// Queue is a minimal job queue: jobs become due at a time.
type Queue struct {
	mu          sync.Mutex
	due         []queued
	outstanding int // jobs not yet completed or given up
	stats       Stats
}

type queued struct {
	job *Job
	at  time.Time
}

// Add puts a new job in the queue.
func (q *Queue) Add(j *Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.outstanding++
	q.due = append(q.due, queued{j, time.Now()})
}

// next returns a due job, or nil; done says every job has finished.
func (q *Queue) next() (j *Job, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, d := range q.due {
		if !time.Now().Before(d.at) {
			q.due = append(q.due[:i], q.due[i+1:]...)
			return d.job, false
		}
	}
	return nil, q.outstanding == 0
}

// requeue makes j due again after delay.
func (q *Queue) requeue(j *Job, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.due = append(q.due, queued{j, time.Now().Add(delay)})
}

// finish records that a job will not run again, counting it with count.
func (q *Queue) finish(count func(*Stats)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.outstanding--
	count(&q.stats)
}

func (q *Queue) count(count func(*Stats)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	count(&q.stats)
}

// Worker takes jobs from a queue and runs them under their leases.
type Worker struct {
	ID     string
	Locker lease.Locker
	Queue  *Queue
	TTL    time.Duration
	Log    func(format string, args ...any)
}

// Loop runs jobs until every job has finished or ctx ends.
func (w *Worker) Loop(ctx context.Context) {
	for ctx.Err() == nil {
		j, done := w.Queue.next()
		if done {
			return
		}
		if j == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		w.runJob(ctx, j)
	}
}

// runJob runs j holding its leases and files the outcome.
func (w *Worker) runJob(ctx context.Context, j *Job) {
	err := hold(ctx, w.Locker, j.leaseNames(), w.TTL, j.Work)
	var busy *lease.HeldError
	switch {
	case errors.As(err, &busy):
		delay := min(busy.Remaining, 30*time.Second)
		w.Log("%s: job %d (%s) deferred %s: %s is busy", w.ID, j.ID, j.Class, delay.Round(time.Millisecond), busy.Name)
		w.Queue.count(func(s *Stats) { s.Deferred++ })
		w.Queue.requeue(j, delay) // j.attempts unchanged
	case errors.Is(err, lease.ErrLost):
		w.Log("%s: job %d (%s) completed, but its lease was lost mid-run: %v", w.ID, j.ID, j.Class, err)
		w.Queue.finish(func(s *Stats) { s.Completed++; s.Lost++ })
	case err != nil:
		j.attempts++
		if j.attempts >= maxAttempts {
			w.Log("%s: job %d (%s) failed for good: %v", w.ID, j.ID, j.Class, err)
			w.Queue.finish(func(s *Stats) { s.Failed++ })
			return
		}
		w.Log("%s: job %d (%s) failed (attempt %d), will retry: %v", w.ID, j.ID, j.Class, j.attempts, err)
		w.Queue.count(func(s *Stats) { s.Retried++ })
		w.Queue.requeue(j, 10*time.Millisecond)
	default:
		w.Log("%s: job %d (%s) completed", w.ID, j.ID, j.Class)
		w.Queue.finish(func(s *Stats) { s.Completed++ })
	}
}

// hold runs fn while holding every lease in names. A busy one ends it
// with that lease's *lease.HeldError; a lost one cancels fn's context.
func hold(ctx context.Context, l lease.Locker, names []string, ttl time.Duration, fn func(context.Context) error) error {
	if len(names) == 0 {
		return fn(ctx)
	}
	return lease.Run(ctx, l, names[0], ttl, func(ctx context.Context) error {
		return hold(ctx, l, names[1:], ttl, fn)
	})
}

// run puts a mix of jobs in a queue and lets two workers run them.
func run(ctx context.Context, out io.Writer) (Stats, error) {
	store := memory.New()
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	work := func(d time.Duration) func(context.Context) error {
		return func(ctx context.Context) error {
			select {
			case <-time.After(d):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	}
	flaky := 0
	q := &Queue{}
	for _, j := range []*Job{
		{Class: "reindex", Exclusive: true, Work: work(100 * time.Millisecond)},
		{Class: "reindex", Exclusive: true, Work: work(100 * time.Millisecond)},
		{Class: "sync-account", Key: "customer-42", Work: work(50 * time.Millisecond)},
		{Class: "invoice", Key: "customer-42", Work: work(50 * time.Millisecond)},
		{Class: "email", Work: work(10 * time.Millisecond)},
		{Class: "webhook", Work: func(ctx context.Context) error {
			if flaky++; flaky == 1 {
				return errors.New("endpoint answered 503")
			}
			return nil
		}},
		{Class: "export", Exclusive: true, Work: func(ctx context.Context) error {
			// An operator forces the lease free while the export runs
			// (lease release --force job:export); the export finishes.
			if _, err := store.ForceRelease(ctx, "job:export"); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		}},
	} {
		j.ID = q.outstanding + 1
		q.Add(j)
	}

	// Check the promise: never two jobs under one lease at a time.
	running := map[string]int{}
	var overlap error
	for _, j := range q.due {
		work := j.job.Work
		j.job.Work = func(ctx context.Context) error {
			mu.Lock()
			for _, name := range j.job.leaseNames() {
				if running[name]++; running[name] > 1 {
					overlap = fmt.Errorf("two jobs ran under %s at once", name)
				}
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				for _, name := range j.job.leaseNames() {
					running[name]--
				}
				mu.Unlock()
			}()
			return work(ctx)
		}
	}

	var wg sync.WaitGroup
	for _, id := range []string{"worker-1", "worker-2"} {
		w := &Worker{ID: id, Locker: store, Queue: q, TTL: 300 * time.Millisecond, Log: logf}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Loop(ctx)
		}()
	}
	wg.Wait()
	q.mu.Lock()
	defer q.mu.Unlock()
	if overlap != nil {
		return q.stats, overlap
	}
	return q.stats, ctx.Err()
}
