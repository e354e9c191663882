package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/etcdfence"
)

// Two holders of the lease "report" write the report's key; the older
// one's write is refused, and changes nothing, once the newer one has
// written. The etcd cluster is the one in ETCD_ENDPOINTS (such as
// "127.0.0.1:2379"; the package's tests start an embedded server and set
// it). Tokens come from Lease.Token in a real program.
func Example() {
	ctx := context.Background()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Getenv("ETCD_ENDPOINTS"), ","),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	defer client.Delete(ctx, "example/", clientv3.WithPrefix())

	f, err := etcdfence.New(client, etcdfence.WithPrefix("example/fence/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	write := func(token uint64, body string) error {
		_, err := f.Do(ctx, "report", token, clientv3.OpPut("example/report", body))
		return err
	}

	fmt.Println("old holder writes:", write(100, "draft"))
	fmt.Println("new holder writes:", write(200, "final"))
	var stale *fence.StaleError
	if err := write(100, "late draft"); errors.As(err, &stale) {
		fmt.Printf("old holder wakes up and writes: refused, token %d beat %d\n", stale.Max, stale.Token)
	}
	resp, err := client.Get(ctx, "example/report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("the report reads: %s\n", resp.Kvs[0].Value)
	// Output:
	// old holder writes: <nil>
	// new holder writes: <nil>
	// old holder wakes up and writes: refused, token 200 beat 100
	// the report reads: final
}

// The fence in a transaction of your own, beside a comparison of yours:
// Refused tells which one failed.
func ExampleFence_Guard() {
	ctx := context.Background()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Getenv("ETCD_ENDPOINTS"), ","),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	defer client.Delete(ctx, "example-guard/", clientv3.WithPrefix())
	f, err := etcdfence.New(client, etcdfence.WithPrefix("example-guard/fence/"))
	if err != nil {
		fmt.Println(err)
		return
	}

	// Publish a report only while the schema is v1, and only as the
	// newest holder of the lease "publisher".
	if _, err := client.Put(ctx, "example-guard/schema", "v1"); err != nil {
		fmt.Println(err)
		return
	}
	publish := func(token uint64) error {
		g, err := f.Guard("publisher", token)
		if err != nil {
			return err
		}
		resp, err := client.Txn(ctx).
			If(g.Cmp, clientv3.Compare(clientv3.Value("example-guard/schema"), "=", "v1")).
			Then(append(g.Ops, clientv3.OpPut("example-guard/report", fmt.Sprint("by ", token)))...).
			Else(g.Read).
			Commit()
		if err != nil {
			return err
		}
		if err := f.Refused(ctx, g, resp); err != nil {
			return err // stale
		}
		if !resp.Succeeded {
			return errors.New("the schema changed")
		}
		return nil
	}
	fmt.Println(publish(7))
	fmt.Println(errors.Is(publish(6), fence.ErrStale))
	if _, err := client.Put(ctx, "example-guard/schema", "v2"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(publish(8))
	// Output:
	// <nil>
	// true
	// the schema changed
}
