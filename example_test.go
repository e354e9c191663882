package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/driver"
)

// Run is how most programs use a lease: the work runs only where the lease
// was won, renewals keep it while the work runs, and the work's context
// ends if the lease is lost.
func ExampleRun() {
	locker := memory.New() // or sqllease, redislease, etcdlease, lease.Open(...)
	defer locker.Close()

	err := lease.Run(context.Background(), locker, "nightly-report", time.Minute, func(ctx context.Context) error {
		l, _ := lease.FromContext(ctx)
		fmt.Println("generating the report as holder", l.Token > 0)
		return nil // pass l.Token to the systems you write to
	})
	if errors.Is(err, lease.ErrHeld) {
		fmt.Println("another instance is running it")
		return
	}
	fmt.Println("done:", err)
	// Output:
	// generating the report as holder true
	// done: <nil>
}

// A busy lease is ErrHeld, and the *HeldError says who holds it and for
// how long, so a job queue can defer the job instead of failing it.
func ExampleHeldError() {
	locker := memory.New()
	ctx := context.Background()
	if _, err := locker.Acquire(ctx, "job:resize", "worker-1", 20*time.Second); err != nil {
		panic(err)
	}
	_, err := locker.Acquire(ctx, "job:resize", "worker-2", 20*time.Second)
	var held *lease.HeldError
	if errors.As(err, &held) {
		wait := min(held.Remaining, 30*time.Second)
		fmt.Printf("held by %s; retry in about %s\n", held.Owner, wait.Round(10*time.Second))
	}
	// Output: held by worker-1; retry in about 20s
}

// Using a Locker directly: acquire, renew, release, each fenced by the
// owner and the token.
func ExampleLocker() {
	ctx := context.Background()
	var locker lease.Locker = memory.New()
	defer locker.Close()

	owner := lease.NewOwner()
	l, err := locker.Acquire(ctx, "leader", owner, 10*time.Second)
	if err != nil {
		panic(err)
	}
	l, err = locker.Renew(ctx, l, 10*time.Second) // keep the newest Lease
	if err != nil {
		panic(err)
	}
	cur, _ := locker.Inspect(ctx, "leader")
	fmt.Println("holder is me:", cur.Owner == owner, "same token:", cur.Token == l.Token)

	if err := locker.Release(ctx, l); errors.Is(err, lease.ErrLost) {
		fmt.Println("the lease had been lost: another holder may have run")
	}
	_, err = locker.Inspect(ctx, "leader")
	fmt.Println("after release:", err)
	// Output:
	// holder is me: true same token: true
	// after release: lease/memory: inspect "leader": lease: not held
}

// Open picks a backend by URL; the backend's package must be imported.
func ExampleOpen() {
	locker, err := lease.Open(context.Background(), "mem://")
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	_, err = lease.Open(context.Background(), "redis://127.0.0.1:6379/0")
	fmt.Println(err)
	// Output: lease: invalid argument: no backend registered for scheme "redis": import _ "github.com/leasekit/lease/backend/redis" (or github.com/leasekit/lease/backend/all)
}

// Can asks what a Locker can do beyond the four calls, as its store can:
// an operator's command offers "list" only where it works.
func ExampleCan() {
	locker := memory.New()
	defer locker.Close()

	fmt.Println("list:", lease.Can[lease.Lister](locker))
	fmt.Println("watch:", lease.Can[driver.Watcher](locker))
	// Output:
	// list: true
	// watch: true
}

// WithFairWait serves the waiters of a name in the order they came, over
// the store's line of waiters; on a store without one (SQLite, MySQL) it
// fails at once instead of waiting unfairly.
func ExampleWithFairWait() {
	locker := memory.New()
	defer locker.Close()

	err := lease.Run(context.Background(), locker, "migrations", time.Minute, func(ctx context.Context) error {
		fmt.Println("migrating")
		return nil
	}, lease.WithFairWait(time.Minute))
	fmt.Println(err)
	// Output:
	// migrating
	// <nil>
}
