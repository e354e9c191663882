package redisfence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/redisfence"
)

// Two holders of the lease "report" write the report's keys; the older
// one's write is refused, and changes nothing, once the newer one has
// written. Here the server is miniredis, an in-process Redis for tests;
// in production pass your client (redis.NewClient, NewFailoverClient or
// NewClusterClient). Tokens come from Lease.Token in a real program.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	ctx := context.Background()

	// Every key the lease guards carries the hash tag {report:42}.
	f, err := redisfence.New(client, "report:42")
	if err != nil {
		panic(err)
	}
	write := func(token uint64, body string) error {
		_, err := f.Do(ctx, "report", token,
			redisfence.Cmd("SET", "{report:42}:body", body),
			redisfence.Cmd("INCRBY", "{report:42}:revisions", 1))
		return err
	}

	fmt.Println("old holder writes:", write(100, "draft"))
	fmt.Println("new holder writes:", write(200, "final"))
	var stale *fence.StaleError
	if err := write(100, "late draft"); errors.As(err, &stale) {
		fmt.Printf("old holder wakes up and writes: refused, token %d beat %d\n", stale.Max, stale.Token)
	}
	fmt.Println("body:", client.Get(ctx, "{report:42}:body").Val())
	fmt.Println("revisions:", client.Get(ctx, "{report:42}:revisions").Val())

	// A key outside the tag could live on another Cluster node: refused.
	_, err = f.Do(ctx, "report", 200, redisfence.Cmd("SET", "report:42:body", "x"))
	fmt.Println(err != nil)
	// Output:
	// old holder writes: <nil>
	// new holder writes: <nil>
	// old holder wakes up and writes: refused, token 200 beat 100
	// body: final
	// revisions: 2
	// true
}
