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
// The store is --backend URL, else $LEASE_BACKEND, else mem://, a memory
// store in this process. The two workers here share one connection to it;
// give workers on several machines one store URL and they share the work
// the same way. --prefix goes before every lease name, to keep apart the
// apps (or test runs) that share a store.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
)

func main() {
	err := cli(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

// cli is the program: it reads the flags, opens the store, says which it
// is, runs the jobs on it and prints the counts.
func cli(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", "", "lease store URL (default $LEASE_BACKEND, else mem://)")
	prefix := fs.String("prefix", "", "put before every lease name, to keep apart the apps sharing a store")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	raw := *backend
	if raw == "" {
		raw = getenv("LEASE_BACKEND")
	}
	if raw == "" {
		raw = "mem://"
	}
	l, err := lease.Open(ctx, raw)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "store: %s\n", describe(raw))
	stats, err := run(ctx, l, *prefix, stdout)
	if err == nil {
		fmt.Fprintf(stdout, "%+v\n", stats)
	}
	return errors.Join(err, l.Close())
}

// describe names a store URL for people: without its password or query,
// which can hold secrets.
func describe(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if u.Host == "" && u.Path == "" && u.Opaque == "" {
		return u.Scheme + "://"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
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
	Prefix string // put before every lease name
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
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		w.runJob(ctx, j)
	}
}

// runJob runs j holding its leases and files the outcome.
func (w *Worker) runJob(ctx context.Context, j *Job) {
	var names []string
	for _, name := range j.leaseNames() {
		names = append(names, w.Prefix+name)
	}
	err := hold(ctx, w.Locker, names, w.TTL, j.Work)
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

// ttl is the jobs' leases' ttl: a worker that dies holding one blocks its
// jobs this long. A real one would be a minute or so; this demo needs less.
const ttl = time.Second

// run puts a mix of jobs in a queue and lets two workers run them on l,
// with prefix before every lease name.
func run(ctx context.Context, l lease.Locker, prefix string, out io.Writer) (Stats, error) {
	operator, ok := l.(lease.ForceReleaser)
	ok = ok && lease.Can[lease.ForceReleaser](l)
	if !ok {
		return Stats{}, fmt.Errorf("the store cannot force a lease free (%T is no lease.ForceReleaser)", l)
	}
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
			if _, err := operator.ForceRelease(ctx, prefix+"job:export"); err != nil {
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
		w := &Worker{ID: id, Locker: l, Prefix: prefix, Queue: q, TTL: ttl, Log: logf}
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
