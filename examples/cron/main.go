// Command cron runs a scheduled job on one instance of a service that
// runs on several.
//
// Every instance has the same schedule, so at 02:00 the nightly report
// fires on all of them. Each wraps the job in lease.Run under a name that
// includes the scheduled time: the first to acquire it runs the job and
// the others find it held and skip it. lease.WithMinHold keeps the lease a
// while after a quick job ends, so an instance whose timer fires a little
// late still finds it held instead of sending the report a second time.
//
// The instances here are goroutines, each with its own connection to one
// store, a SQLite file by default; give several machines one Postgres,
// Redis or etcd URL and they coordinate the same way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
)

func main() {
	def := url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(os.TempDir(), "lease-cron-example.db"))}
	backend := flag.String("backend", def.String(), "lease store URL, shared by every instance")
	flag.Parse()
	if err := run(context.Background(), *backend, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// minHold is how long the lease outlives the job: more than the instances'
// timers can drift apart. A minute is typical; this demo needs less.
const minHold = 2 * time.Second

// run fires the 02:00 report on instance-1 and instance-2 at once, and on
// instance-3 after the report is done, and checks it was sent once.
func run(ctx context.Context, backend string, out io.Writer) error {
	now := time.Now().UTC()
	slot := time.Date(now.Year(), now.Month(), now.Day(), 2, 0, 0, 0, time.UTC)
	name := "nightly-report/" + slot.Format(time.RFC3339)

	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	var sent atomic.Int32
	reportDone := make(chan struct{})
	var doneOnce sync.Once

	// fire is what the scheduler calls on an instance at 02:00.
	fire := func(instance string) error {
		l, err := lease.Open(ctx, backend)
		if err != nil {
			return err
		}
		defer l.Close()
		err = lease.Run(ctx, l, name, time.Minute, func(ctx context.Context) error {
			held, _ := lease.FromContext(ctx)
			say("%s sends %s (token %d)", instance, name, held.Token)
			sent.Add(1)
			doneOnce.Do(func() { close(reportDone) })
			return nil
		}, lease.WithOwner(instance), lease.WithMinHold(minHold))
		var busy *lease.HeldError
		if errors.As(err, &busy) {
			say("%s skips it: held by %s for another %s", instance, busy.Owner, busy.Remaining.Round(time.Second))
			return nil
		}
		return err
	}

	say("02:00: the schedule fires on instance-1 and instance-2")
	var errs [3]error
	var wg sync.WaitGroup
	for i, instance := range []string{"instance-1", "instance-2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fire(instance)
		}()
	}
	bothReturned := make(chan struct{})
	go func() {
		wg.Wait()
		close(bothReturned)
	}()
	select {
	case <-reportDone:
		say("instance-3's timer fires late, after the report was sent")
		errs[2] = fire("instance-3")
	case <-bothReturned:
	}
	<-bothReturned
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	if n := sent.Load(); n != 1 {
		return fmt.Errorf("the report was sent %d times, want once", n)
	}
	return nil
}
