package etcdlease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/leasekit/lease"
	etcdlease "github.com/leasekit/lease/backend/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Example takes a lease on the etcd cluster in ETCD_ENDPOINTS (such as
// "127.0.0.1:2379"; the package's tests start an embedded server and set
// it), shows that another owner is refused, and releases it.
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
	locker, err := etcdlease.New(client, etcdlease.WithPrefix("example/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	held, err := locker.Acquire(ctx, "nightly-report", "worker-1", 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("worker-1 holds", held.Name, "with a token:", held.Token > 0)

	var busy *lease.HeldError
	_, err = locker.Acquire(ctx, "nightly-report", "worker-2", 30*time.Second)
	if errors.As(err, &busy) {
		fmt.Println("worker-2 is refused: held by", busy.Owner)
	}

	// ... do the work while held.Valid(), passing held.Token to the
	// systems it writes to ...

	if err := locker.Release(ctx, held); err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.Inspect(ctx, "nightly-report")
	fmt.Println("after Release, not held:", errors.Is(err, lease.ErrNotHeld))

	// Output:
	// worker-1 holds nightly-report with a token: true
	// worker-2 is refused: held by worker-1
	// after Release, not held: true
}
