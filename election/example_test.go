package election_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/election"
)

// A service runs a candidate for as long as it lives: it leads when
// elected and stands by otherwise. Cancelling the context (on SIGTERM,
// say) hands the office off: the work's context ends, the work returns,
// and only then is the lease released.
func ExampleCandidate_Run() {
	locker := memory.New() // or any lease.Locker: lease.Open(ctx, url)
	ctx, shutdown := context.WithCancel(context.Background())

	c, err := election.NewCandidate(locker, "scheduler", election.WithID("node-a"), election.WithMetadata("10.0.0.5:8080"))
	if err != nil {
		panic(err)
	}
	err = c.Run(ctx, func(ctx context.Context, t election.Term) error {
		fmt.Printf("%s leads term %d\n", t.Leader, t.Number)
		shutdown() // as a signal would
		<-ctx.Done()
		fmt.Println("the work stops:", context.Cause(ctx))
		return ctx.Err()
	})
	fmt.Println("Run:", err)
	// Output:
	// node-a leads term 1
	// the work stops: context canceled
	// Run: <nil>
}

// A graceful handoff: node-a resigns while node-b stands by; node-a's
// work has returned before node-b's starts, and node-b, woken by the
// store's notification, leads at once with a larger term.
func ExampleCandidate_Resign() {
	store := memory.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, _ := election.NewCandidate(store.Share(), "scheduler", election.WithID("node-a"))
	b, _ := election.NewCandidate(store.Share(), "scheduler", election.WithID("node-b"))

	elected := make(chan election.Term)
	work := func(ctx context.Context, t election.Term) error {
		fmt.Printf("%s starts term %d\n", t.Leader, t.Number)
		elected <- t
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // finishing what it was doing
		fmt.Printf("%s stops: %v\n", t.Leader, context.Cause(ctx))
		return nil
	}
	done := make(chan error, 2)
	go func() { done <- a.Run(ctx, work) }()
	<-elected
	go func() { done <- b.Run(ctx, work) }()

	if err := a.Resign(ctx); err != nil {
		fmt.Println("handoff:", err)
	}
	<-elected
	cancel()
	<-done
	<-done
	// Output:
	// node-a starts term 1
	// node-a stops: election: the candidate resigned
	// node-b starts term 2
	// node-b stops: context canceled
}

// Lead is one term, for a caller that decides itself what to do after
// it; the callbacks fire once per term, for the candidate that led it.
func ExampleCandidate_Lead() {
	locker := memory.New()
	c, _ := election.NewCandidate(locker, "compactor", election.WithID("node-a"),
		election.OnStartedLeading(func(t election.Term) { fmt.Println("started leading term", t.Number) }),
		election.OnStoppedLeading(func(t election.Term, err error) { fmt.Println("stopped leading term", t.Number, "with", err) }))

	err := c.Lead(context.Background(), func(ctx context.Context, t election.Term) error {
		held, _ := lease.FromContext(ctx) // the lease, as of its latest renewal
		fmt.Println("compacting under fencing token", held.Token)
		return nil
	})
	fmt.Println("Lead:", err)
	// Output:
	// started leading term 1
	// compacting under fencing token 1
	// stopped leading term 1 with <nil>
	// Lead: <nil>
}

// Anyone can follow the office: Observe reports the current term, then
// every change, "no leader" included.
func ExampleObserve() {
	store := memory.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan election.Term)
	go func() {
		defer close(reports)
		for t, err := range election.Observe(ctx, store, "scheduler") {
			if err != nil {
				continue // a store error: Observe tries again
			}
			reports <- t
		}
	}()
	fmt.Println(<-reports)

	c, _ := election.NewCandidate(store, "scheduler", election.WithID("node-a"), election.WithMetadata("10.0.0.5:8080"))
	_ = c.Lead(ctx, func(ctx context.Context, _ election.Term) error {
		fmt.Println(<-reports) // the observer sees the new leader
		return nil             // the term ends: the office falls vacant
	})
	fmt.Println(<-reports)
	cancel()
	for range reports {
	}
	// Output:
	// office "scheduler": no leader
	// office "scheduler": term 1, leader "node-a" (metadata "10.0.0.5:8080")
	// office "scheduler": no leader
}

// Current reads the leader once, for a client looking for the leader's
// address.
func ExampleCurrent() {
	store := memory.New()
	ctx := context.Background()
	c, _ := election.NewCandidate(store, "api", election.WithID("node-b"), election.WithMetadata("http://10.0.0.6:8080"))
	_ = c.Lead(ctx, func(ctx context.Context, _ election.Term) error {
		t, err := election.Current(ctx, store, "api")
		if err != nil {
			return err
		}
		fmt.Printf("send writes to %s (term %d)\n", t.Metadata, t.Number)
		return nil
	})
	t, _ := election.Current(ctx, store, "api")
	fmt.Println("vacant:", t.Vacant())
	// Output:
	// send writes to http://10.0.0.6:8080 (term 1)
	// vacant: true
}

// Options are checked when the candidate is made: a bad one is an error
// matching lease.ErrInvalid that names it.
func ExampleNewCandidate() {
	_, err := election.NewCandidate(memory.New(), "api", election.WithID("node b"))
	fmt.Println(errors.Is(err, lease.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// lease: invalid argument: election: WithID: the candidate ID "node b" contains ' ': IDs are printed on one line and end at the first space, so they may not contain spaces or control characters
}
