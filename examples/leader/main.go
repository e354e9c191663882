// Command leader shows leader election with package election: candidates
// that stand by, a leader that hands off gracefully, a leader cut off from
// the store that steps down before anyone else can lead, and a client
// that follows the office to find the leader's address.
//
// Three candidates campaign for the office "leader", each publishing the
// address it would serve on. node-a leads first; node-b stands by. node-a
// resigns, as a rolling deploy would make it: its work stops first, and
// only then is the office released, so node-b's work never overlaps it.
// node-c joins, then node-b loses its connection to the store: it keeps
// leading only until its lease's Deadline, which lease sets a safety
// margin before the store's expiry by node-b's own clock, so it has
// stepped down before the store can elect node-c. Each term's number is
// the lease's fencing token: the resource the leaders write to refuses a
// write from an earlier term.
//
// The candidates are goroutines sharing one store: memory by default; give
// -backend a PostgreSQL, MySQL, SQLite, Redis or etcd URL to run them on
// that store.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/election"
	"github.com/leasekit/lease/fence"
)

func main() {
	backend := flag.String("backend", "mem://", "lease store URL, shared by every candidate")
	flag.Parse()
	ctx := context.Background()
	l, err := lease.Open(ctx, *backend)
	if err != nil {
		log.Fatal(err)
	}
	err = run(ctx, os.Stdout, l, 600*time.Millisecond)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}
}

// office is the name the candidates campaign for.
const office = "leader"

// event is something a candidate's work did, and when by this process's
// clock.
type event struct {
	who, what string
	term      uint64
	at        time.Time
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

// Watch passes the store's notifications on while the connection is up
// (they are hints: a candidate acquires anyway).
func (p *partitioned) Watch(ctx context.Context, name string) (driver.Watch, error) {
	w, ok := p.Locker.(driver.Watcher)
	ok = ok && lease.Can[driver.Watcher](p.Locker)
	if !ok || p.down.Load() {
		return nil, errors.ErrUnsupported
	}
	return w.Watch(ctx, name)
}

// run plays the story on the store l, with candidates whose leases last
// ttl, and checks its promises: node-b's work starts after node-a's has
// stopped, and node-c leads only after node-b stepped down.
func run(ctx context.Context, out io.Writer, l lease.Locker, ttl time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan event, 16)
	resource := &fence.Memory{} // what the leaders write to

	// The work every leader does: write to the resource under its term
	// (the fencing token), serve until its term ends, then finish what it
	// was doing.
	work := func(ctx context.Context, t election.Term) error {
		if err := resource.Check(ctx, office, t.Number); err != nil {
			return err
		}
		events <- event{t.Leader, "leads", t.Number, time.Now()}
		<-ctx.Done()
		why := "stops"
		if errors.Is(context.Cause(ctx), election.ErrResigned) {
			why = "resigns"
		}
		if errors.Is(context.Cause(ctx), lease.ErrLost) {
			why = "steps down: its Deadline passed without a renewal"
		} else {
			time.Sleep(ttl / 6) // finishing the request in hand
		}
		events <- event{t.Leader, why, t.Number, time.Now()}
		return nil
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	candidates := map[string]*election.Candidate{}
	start := func(id, addr string, l lease.Locker) {
		c, err := election.NewCandidate(l, office, election.WithID(id), election.WithMetadata(addr), election.WithTTL(ttl))
		if err != nil {
			panic(err) // the IDs and addresses here are valid
		}
		candidates[id] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Run(ctx, work)
		}()
	}
	next := func() event {
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			return event{}
		}
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	// A client follows the office to send its requests to the leader.
	var seenMu sync.Mutex
	var seen []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for t, err := range election.Observe(ctx, l, office) {
			if err == nil && !t.Vacant() {
				seenMu.Lock()
				seen = append(seen, fmt.Sprintf("%s at %s (term %d)", t.Leader, t.Metadata, t.Number))
				seenMu.Unlock()
			}
		}
	}()

	start("node-a", "10.0.0.1:8080", l)
	a := next()
	say("%s leads term %d", a.who, a.term)
	netB := &partitioned{Locker: l}
	start("node-b", "10.0.0.2:8080", netB)

	time.Sleep(ttl / 2) // node-b stands by
	say("node-a is asked to resign (a rolling deploy)")
	if err := candidates["node-a"].Resign(ctx); err != nil {
		return fmt.Errorf("node-a's handoff: %w", err)
	}
	stopped, b := next(), next()
	say("%s %s: its work stopped, then the office was released", stopped.who, stopped.what)
	say("%s leads term %d, %s after node-a's work stopped", b.who, b.term, roundDuration(b.at.Sub(stopped.at)))
	if b.who != "node-b" || b.at.Before(stopped.at) {
		return fmt.Errorf("%s led at %s, node-a's work stopped at %s: two leaders at once", b.who, b.at, stopped.at)
	}

	start("node-c", "10.0.0.3:8080", l)
	time.Sleep(ttl / 2) // node-c stands by
	netB.down.Store(true)
	say("node-b loses its connection to the store")
	down, c := next(), next()
	say("%s %s", down.who, down.what)
	say("%s leads term %d, %s after node-b stepped down", c.who, c.term, roundDuration(c.at.Sub(down.at)))
	if down.who != "node-b" || c.who != "node-c" || !down.at.Before(c.at) {
		return fmt.Errorf("%s led at %s, %s stepped down at %s: two leaders at once", c.who, c.at, down.who, down.at)
	}

	// node-b's term is over: a write it makes now, late, is refused.
	err := resource.Check(ctx, office, b.term)
	say("a late write by node-b under term %d: %v", b.term, err)
	if !errors.Is(err, fence.ErrStale) {
		return errors.New("the resource accepted a write from an old term")
	}

	// The client notices node-c at its next read of the office.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		seenMu.Lock()
		n := len(seen)
		seenMu.Unlock()
		if n == 3 {
			break
		}
	}
	cancel() // shut everyone down: node-c hands off
	wg.Wait()
	seenMu.Lock()
	defer seenMu.Unlock()
	say("a client following the office saw:")
	for _, s := range seen {
		say("  %s", s)
	}
	return nil
}

// roundDuration rounds d for printing: to 10µs below 10ms, else to 1ms.
func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
