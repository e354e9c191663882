package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// TestMain checks that a stopped server leaves no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestEndpoints: the server Endpoints starts serves reads and writes and
// grants 1s leases.
func TestEndpoints(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := "etcdtest/" + t.Name()
	if _, err := c.Put(ctx, key, "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	r, err := c.Get(ctx, key)
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get = %v, %v; want the value put", r, err)
	}
	g, err := c.Grant(ctx, 1)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if etcdtest.External() == nil && g.TTL != 1 {
		t.Fatalf("the embedded server granted a %ds lease for 1s; its election timeout is too long", g.TTL)
	}
	if _, err := c.Revoke(ctx, g.ID); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := c.Delete(ctx, key); err != nil {
		t.Fatalf("delete: %v", err)
	}
}
