// Command cron keeps a scheduled job to one run per slot, on a service
// that runs on several instances, even when the job is run again later in
// the slot.
//
// Every instance has the same schedule, so at 02:00 the daily report fires
// on all of them; an operator may also re-run it by hand at 14:00. Each
// Fire acquires the lease named after the job and its slot,
// "report@2026-12-02T02:00Z", with a ttl reaching the end of the slot. The
// first runs the job; the others find the name held and skip. After a
// successful run the lease is not released: it stays in the store until
// the slot ends, so a re-run that day finds it held too, and no process
// has to stay alive for that. A failed run releases it, so that a retry
// may run; a crashed one leaves the slot taken until it ends (see
// Instance.Fire).
//
// The program plays two days on a simulated clock (the scheduler's
// clock: the store keeps its own) against one store: --backend URL, else
// $LEASE_BACKEND, else mem://, a memory store in this process. The
// instances are goroutines sharing one connection; give instances on
// several machines one store URL and they coordinate the same way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
	"github.com/leasekit/lease/backend/memory"
)

func main() {
	err := cli(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "cron:", err)
		os.Exit(1)
	}
}

// cli is the program: it reads the flags, opens the store, says which it
// is, and plays the demo on it.
func cli(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cron", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", "", "lease store URL (default $LEASE_BACKEND, else mem://)")
	job := fs.String("job", "report", "the job's name: its slots' lease names are NAME@slot")
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
	err = demo(ctx, l, *job, stdout)
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

// daily is the demo's schedule: every day at 02:00 UTC.
var daily = Every{Period: 24 * time.Hour, Offset: 2 * time.Hour}

// day1 is the simulated clock's first slot.
var day1 = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

// step is one event of the demo: at a time, an instance fires the job.
type step struct {
	after    time.Duration // since day1
	instance string
	why      string
	fail     error // what the run fails with, or nil
}

var steps = []step{
	{0, "instance-1", "the schedule fires on instance-1", nil},
	{400 * time.Millisecond, "instance-2", "the schedule fires on instance-2, its timer a little late", nil},
	{12 * time.Hour, "instance-3", "an operator re-runs the job on instance-3", nil},
	{24 * time.Hour, "instance-2", "the schedule fires on instance-2", errors.New("mail server unreachable")},
	{24*time.Hour + 400*time.Millisecond, "instance-3", "the schedule fires on instance-3, its timer a little late", nil},
	{24*time.Hour + 7*time.Hour + 30*time.Minute, "instance-1", "an operator re-runs the job on instance-1", nil},
}

// demo plays the steps on a simulated clock, with a daily job at 02:00
// UTC called job, and fails if a slot ran successfully twice.
func demo(ctx context.Context, l lease.Locker, job string, out io.Writer) error {
	clock := memory.NewManualClock(day1)
	instances := map[string]*Instance{}
	for _, s := range steps {
		if instances[s.instance] == nil {
			instances[s.instance] = &Instance{ID: s.instance, Locker: l, Clock: clock}
		}
	}
	done := map[string]int{} // successful runs per slot
	const stamp = "2006-01-02 15:04:05.000"
	for _, s := range steps {
		clock.Advance(day1.Add(s.after).Sub(clock.Now()))
		fmt.Fprintf(out, "%s %s\n", clock.Now().Format(stamp), s.why)
		err := instances[s.instance].Fire(ctx, Job{
			Name:     job,
			Schedule: daily,
			Run: func(ctx context.Context, slot Slot) error {
				fmt.Fprintf(out, "  %s runs %s (token %d)\n", s.instance, slot.Name, slot.Token)
				return s.fail
			},
		})
		start, end := daily.Slot(clock.Now())
		name := SlotName(job, start)
		var taken *lease.HeldError
		switch {
		case err == nil:
			done[name]++
			fmt.Fprintf(out, "  done: %s stays taken until %s, released by no one\n", name, end.Format("2006-01-02 15:04"))
		case errors.As(err, &taken):
			fmt.Fprintf(out, "  skipped: %s is taken, by %s\n", name, instanceOf(taken.Owner))
		case errors.Is(err, s.fail):
			fmt.Fprintf(out, "  failed: %v; %s is released, so a retry may run\n", err, name)
		default:
			return err
		}
	}
	for name, n := range done {
		if n > 1 {
			return fmt.Errorf("%s ran %d times", name, n)
		}
	}
	return nil
}
