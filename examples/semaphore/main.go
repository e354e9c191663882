// Command semaphore shows package semaphore: six exports that may run at
// most two at a time, on any store.
//
// Every export starts at once and waits for one of the semaphore's two
// slots (semaphore.Run with WithWait): two run, the others wait, and each
// release wakes a waiter, which takes the freed slot. Each export learns
// its slot and its slot's fencing token, and writes to the warehouse
// under a fence kept per slot (the slot's lease name), since tokens
// increase per slot and not across slots: a late write by an export that
// held a slot earlier is refused once that slot's next holder has
// written.
//
// The exports are goroutines sharing one store: memory by default; give
// -backend a PostgreSQL, MySQL, SQLite, Redis or etcd URL to run them on
// that store (and -name to keep runs apart).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/semaphore"
)

func main() {
	backend := flag.String("backend", "mem://", "lease store URL, shared by every export")
	name := flag.String("name", "exports", "the semaphore's name")
	flag.Parse()
	ctx := context.Background()
	l, err := lease.Open(ctx, *backend)
	if err != nil {
		log.Fatal(err)
	}
	err = run(ctx, os.Stdout, l, *name, 2*time.Second)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}
}

// The exports and the slots they share.
const (
	exports = 6
	slots   = 2
)

// work is how long each export takes.
const work = 50 * time.Millisecond

// run runs the exports on l under the semaphore name, each holding its
// slot's lease for ttl at a time, and reports to w.
func run(ctx context.Context, w io.Writer, l lease.Locker, name string, ttl time.Duration) error {
	var (
		mu        sync.Mutex // w and tenures
		tenures   []semaphore.Slot
		running   atomic.Int32
		most      atomic.Int32
		warehouse fence.Memory // the resource the exports write to
		wg        sync.WaitGroup
		errs      = make([]error, exports)
	)
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", args...)
	}
	for i := range exports {
		who := fmt.Sprintf("export-%d", i+1)
		wg.Go(func() {
			errs[i] = semaphore.Run(ctx, l, name, slots, ttl, func(ctx context.Context, s semaphore.Slot) error {
				now := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				mu.Lock()
				tenures = append(tenures, s)
				mu.Unlock()
				say("%s runs in slot %d", who, s.Index)
				// The write is fenced per slot: under the slot's lease name.
				return warehouse.Guard(ctx, s.Lease.Name, s.Lease.Token, func() error {
					t := time.NewTimer(work)
					defer t.Stop()
					select {
					case <-t.C:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			}, semaphore.WithWait(time.Minute))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	say("%d exports ran, at most %d at once", len(tenures), most.Load())

	// The first holder of a slot that had several, paused until now,
	// writes late under its old token: its slot's fence refuses it.
	sort.SliceStable(tenures, func(i, j int) bool { return tenures[i].Lease.Token < tenures[j].Lease.Token })
	per := map[int]int{}
	for _, s := range tenures {
		per[s.Index]++
	}
	for _, s := range tenures {
		if per[s.Index] > 1 {
			err := warehouse.Guard(ctx, s.Lease.Name, s.Lease.Token, func() error { return nil })
			say("a late write by slot %d's first holder: refused: %v", s.Index, errors.Is(err, fence.ErrStale))
			break
		}
	}
	holders, err := semaphore.Holders(ctx, l, name, slots)
	if err != nil {
		return err
	}
	say("slots held now: %d", len(holders))
	return nil
}
