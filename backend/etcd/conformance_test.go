package etcdlease

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
)

// expiryLag is how long after its TTL an etcd lease may still hold its
// key: the leader's lessor looks for expired leases every 500ms and
// revokes them through a consensus round. TestExpiryLag measures it
// (at most about 500ms on the embedded server).
const expiryLag = 750 * time.Millisecond

// TestConformance runs the contract's suite against the shared server:
// the embedded one, or LEASE_TEST_ETCD's.
func TestConformance(t *testing.T) {
	ttl := shortestTTL(t, testEndpoints)
	prefix := randomPrefix()
	u := "etcd://" + strings.Join(testEndpoints, ",") + "?prefix=" + url.QueryEscape(prefix)
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB) lease.Locker {
			l, err := lease.Open(context.Background(), u)
			if err != nil {
				t.Fatalf("lease.Open(%q): %v", u, err)
			}
			return l
		},
		TTL:         ttl,
		Granularity: time.Second,
		ExpiryLag:   expiryLag,
	})
}

// shortestTTL is the shortest lease the server grants: 1s on the embedded
// server; etcd raises shorter requests to 1.5 election timeouts, rounded
// up to whole seconds (2s with the default 1s election timeout).
func shortestTTL(t testing.TB, endpoints []string) time.Duration {
	t.Helper()
	c := newClient(t, endpoints, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := c.Grant(ctx, 1)
	if err != nil {
		t.Fatalf("grant a 1s lease: %v", err)
	}
	if _, err := c.Revoke(ctx, g.ID); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if g.TTL != 1 {
		t.Logf("the server's shortest lease is %ds", g.TTL)
	}
	return time.Duration(g.TTL) * time.Second
}
