// Command leader shows leader election with a lease, and why a leader
// steps down by its lease's Deadline.
//
// Each candidate tries to acquire the lease "leader"; the one that gets it
// leads and renews it every ttl/3. A leader that cannot reach the store
// cannot renew, and the store will give the lease to another candidate
// once it expires. So the leader keeps leading only until its Deadline,
// which lease sets a safety margin before the store's expiry, by this
// process's own clock: it has stepped down before anyone else can lead.
//
// The program runs two candidates on one memory store, cuts the leader
// off from the store, and shows the other take over only after the first
// stepped down.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

func main() {
	if err := run(context.Background(), os.Stdout, 600*time.Millisecond); err != nil {
		log.Fatal(err)
	}
}

// event is something a candidate did, and when by this process's clock.
type event struct {
	who, what string
	at        time.Time
}

// candidate campaigns for the lease "leader" and, while it holds it, leads.
type candidate struct {
	id     string
	store  lease.Locker
	ttl    time.Duration
	events chan<- event
}

// campaign tries to become leader until ctx ends.
func (c *candidate) campaign(ctx context.Context) {
	for {
		held, err := c.store.Acquire(ctx, "leader", c.id, c.ttl)
		wait := c.ttl / 3
		var busy *lease.HeldError
		switch {
		case err == nil:
			c.lead(ctx, held)
		case errors.As(err, &busy):
			wait = min(busy.Remaining, c.ttl) // try again when it may be free
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// lead acts as leader until the lease is lost, its Deadline passes
// without a renewal, or ctx ends.
func (c *candidate) lead(ctx context.Context, held lease.Lease) {
	c.report(ctx, "leads with token "+fmt.Sprint(held.Token), time.Now())
	renew := time.NewTicker(c.ttl / 3)
	defer renew.Stop()
	for {
		// Past the Deadline another candidate may lead: stop before it.
		stepDown := time.NewTimer(time.Until(held.Deadline))
		select {
		case <-ctx.Done():
			stepDown.Stop()
			rctx, cancel := context.WithTimeout(context.Background(), c.ttl)
			_ = c.store.Release(rctx, held) // let the next leader start now
			cancel()
			return
		case <-stepDown.C:
			c.report(ctx, "steps down: its Deadline passed without a renewal", held.Deadline)
			return
		case <-renew.C:
			stepDown.Stop()
			rctx, cancel := context.WithDeadline(ctx, held.Deadline)
			got, err := c.store.Renew(rctx, held, c.ttl)
			cancel()
			switch {
			case err == nil:
				held = got
			case errors.Is(err, lease.ErrLost):
				c.report(ctx, "steps down: the lease was lost", time.Now())
				return
			}
			// Any other error: the store is unreachable. Keep leading
			// while the Deadline lasts, and keep trying to renew.
		}
	}
}

func (c *candidate) report(ctx context.Context, what string, at time.Time) {
	select {
	case c.events <- event{c.id, what, at}:
	case <-ctx.Done():
	}
}

// partitioned is a Locker that can be cut off from its store.
type partitioned struct {
	lease.Locker
	down atomic.Bool
}

var errUnreachable = errors.New("store unreachable")

func (p *partitioned) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if p.down.Load() {
		return lease.Lease{}, errUnreachable
	}
	return p.Locker.Acquire(ctx, name, owner, ttl)
}

func (p *partitioned) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if p.down.Load() {
		return lease.Lease{}, errUnreachable
	}
	return p.Locker.Renew(ctx, l, ttl)
}

func (p *partitioned) Release(ctx context.Context, l lease.Lease) error {
	if p.down.Load() {
		return errUnreachable
	}
	return p.Locker.Release(ctx, l)
}

// run elects node-a, cuts it off from the store, and checks that node-b
// leads only after node-a stepped down.
func run(ctx context.Context, out io.Writer, ttl time.Duration) error {
	store := memory.New()
	netA := &partitioned{Locker: store}
	events := make(chan event)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	start := func(c *candidate) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.campaign(ctx)
		}()
	}

	start(&candidate{id: "node-a", store: netA, ttl: ttl, events: events})
	e := <-events
	fmt.Fprintf(out, "%s %s\n", e.who, e.what)
	start(&candidate{id: "node-b", store: store, ttl: ttl, events: events})

	netA.down.Store(true)
	fmt.Fprintln(out, "node-a loses its connection to the store")
	var down, lead event
	for down.who == "" || lead.who == "" {
		switch e := <-events; e.who {
		case "node-a":
			down = e
		case "node-b":
			lead = e
		}
	}
	fmt.Fprintf(out, "%s %s\n", down.who, down.what)
	fmt.Fprintf(out, "%s %s, %s later\n", lead.who, lead.what, lead.at.Sub(down.at).Round(time.Millisecond))
	if !down.at.Before(lead.at) {
		return errors.New("node-b led before node-a stepped down: two leaders at once")
	}
	return nil
}
