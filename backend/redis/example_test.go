package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
)

// A Locker on your own go-redis client. Here the server is miniredis, an
// in-process Redis for tests; in production pass your client for Redis
// (redis.NewClient, redis.NewFailoverClient or redis.NewClusterClient),
// built with ContextTimeoutEnabled so that every call ends by its
// context's deadline.
func ExampleNew() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	locker, err := redislease.New(client, redislease.WithPrefix("myapp:lease:"))
	if err != nil {
		panic(err)
	}
	defer locker.Close() // leaves client open
	ctx := context.Background()

	held, err := locker.Acquire(ctx, "reports/daily", "worker-1", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("worker-1 holds", held.Name, "token > 0:", held.Token > 0)

	_, err = locker.Acquire(ctx, "reports/daily", "worker-2", 30*time.Second)
	var he *lease.HeldError
	if errors.As(err, &he) {
		fmt.Println("worker-2 is told:", he.Owner, "holds it")
	}

	if err := locker.Release(ctx, held); err != nil {
		panic(err)
	}
	next, err := locker.Acquire(ctx, "reports/daily", "worker-2", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("worker-2 holds it next, with a larger token:", next.Token > held.Token)
	// Output:
	// worker-1 holds reports/daily token > 0: true
	// worker-2 is told: worker-1 holds it
	// worker-2 holds it next, with a larger token: true
}

// Opening a Locker by URL, as lease.Open does for the "redis" and "rediss"
// schemes once this package is imported.
func ExampleOpen() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	// Open is bounded by its context: a server that does not answer
	// fails it by the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	locker, err := redislease.Open(ctx, "redis://"+mr.Addr()+"/0?prefix=myapp:lease:&dial_timeout=2s")
	if err != nil {
		panic(err)
	}
	defer locker.Close() // closes the client Open made

	if _, err := locker.Acquire(ctx, "reports/daily", "worker-1", time.Minute); err != nil {
		panic(err)
	}
	cur, err := locker.Inspect(ctx, "reports/daily")
	if err != nil {
		panic(err)
	}
	fmt.Println(cur.Owner, "holds it")
	// Output:
	// worker-1 holds it
}
