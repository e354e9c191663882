package postgreslease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	postgreslease "github.com/leasekit/lease/backend/sql/postgres"
)

// A Locker from a URL (this example only compiles: it needs a server).
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locker, err := postgreslease.Open(ctx, "postgres://app@db.internal:5432/app?sslmode=require",
		sqllease.WithTable("jobs.leases"))
	if err != nil {
		log.Fatal(err) // the server did not answer within 10s, the URL is wrong, ...
	}
	defer locker.Close()
	l, err := locker.Acquire(context.Background(), "billing-run", lease.NewOwner(), 30*time.Second)
	if errors.Is(err, lease.ErrHeld) {
		fmt.Println("someone else is running it")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Release(context.Background(), l)
}

// Importing the package registers postgres:// and postgresql:// with
// lease.Open (this example only compiles: it needs a server).
func Example_leaseOpen() {
	ctx := context.Background()
	locker, err := lease.Open(ctx, "postgresql://app@db.internal/app?table=leases")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	err = lease.Run(ctx, locker, "nightly-report", time.Minute, func(ctx context.Context) error {
		return nil // ctx is cancelled if the lease is lost
	})
	if err != nil {
		log.Print(err)
	}
}
