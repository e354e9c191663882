package testserver_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// etcdClient returns a client of eps, closed when t ends.
func etcdClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestEtcd: a single member serves reads, writes and 1s leases, and keeps
// its data across Kill and Start.
func TestEtcd(t *testing.T) {
	e := testserver.StartEtcd(t, nil)
	if len(e.Endpoints()) != 1 || e.URL() != "etcd://"+e.Endpoints()[0] || e.Leader() != 0 {
		t.Fatalf("endpoints %v, URL %q, leader %d", e.Endpoints(), e.URL(), e.Leader())
	}
	c := etcdClient(t, e.Endpoints())
	if _, err := c.Put(ctx5(t), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Grant(ctx5(t), 1); err != nil {
		t.Fatalf("grant a 1s lease: %v", err)
	}
	e.Member(0).Kill()
	e.Member(0).Start()
	r, err := c.Get(ctx5(t), "k")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("get after Kill and Start = %v, %v; want the value put", r, err)
	}
}

// TestEtcdCluster: three members elect a leader; killing it elects
// another among the two left, which still serve writes; the killed member
// rejoins; a paused member (a partition) does not stop the others.
func TestEtcdCluster(t *testing.T) {
	testenv.Slow(t)
	start := time.Now()
	e := testserver.StartEtcd(t, &testserver.EtcdOptions{Members: 3})
	t.Logf("3 members ready in %s", time.Since(start))
	c := etcdClient(t, e.Endpoints())
	if _, err := c.Put(ctx5(t), "k", "1"); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	old := e.KillLeader()
	leader := e.Leader()
	t.Logf("member %d elected %s after leader %d was killed", leader, time.Since(start), old)
	if leader == old {
		t.Fatalf("leader %d is the killed one", leader)
	}
	if _, err := c.Put(ctx5(t), "k", "2"); err != nil {
		t.Fatalf("put with 2 of 3 members: %v", err)
	}
	e.Member(old).Start()

	other := (leader + 1) % 3
	e.Member(other).Pause()
	// A client whose connection is to the paused member waits on it (it
	// neither fails nor answers), so write through the leader.
	lc := etcdClient(t, []string{e.Member(leader).Addr()})
	if _, err := lc.Put(ctx5(t), "k", "3"); err != nil {
		t.Fatalf("put with one member paused: %v", err)
	}
	e.Member(other).Resume()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ep := range e.Endpoints() {
		st, err := c.Status(ctx, ep)
		if err != nil {
			t.Fatalf("status of %s: %v", ep, err)
		}
		if st.Leader == 0 {
			t.Errorf("%s has no leader", ep)
		}
	}
}
