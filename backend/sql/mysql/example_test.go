package mysqllease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	mysqllease "github.com/leasekit/lease/backend/sql/mysql"
)

// A Locker from a URL (this example only compiles: it needs a server).
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locker, err := mysqllease.Open(ctx, "mysql://app:secret@db.internal:3306/app", sqllease.WithTable("leases"))
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

// Importing the package registers mysql:// with lease.Open (this example
// only compiles: it needs a server).
func Example_leaseOpen() {
	ctx := context.Background()
	locker, err := lease.Open(ctx, "mysql://app:secret@db.internal:3306/app?table=leases")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if _, err := locker.Acquire(ctx, "billing-run", lease.NewOwner(), 30*time.Second); errors.Is(err, lease.ErrHeld) {
		fmt.Println("someone else is running it")
	}
}
