package etcdlease

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/internal/testenv"
)

// expiryLag is how long after its TTL an etcd lease may still hold its
// key: the leader's lessor looks for expired leases every 500ms and
// revokes them through a consensus round. TestExpiryLag measures it
// (at most about 500ms on the embedded server).
const expiryLag = 750 * time.Millisecond

// TestConformance runs the contract's suite against the shared server:
// the embedded one, or LEASE_TEST_ETCD's. The suite's fault cases reach
// it through a TCP proxy in front of its first endpoint (Addr), with
// Lockers opened on the proxy's address (NewAt).
//
// What the lost-reply cases lose on etcd: the proxy swallows the first
// bytes the server sends after the request and resets the connection.
// gRPC carries every call, and the keep-alive streams, on one HTTP/2
// connection, and etcd's gRPC server often sends a PING (its flow-control
// estimate) as soon as a request's data arrives, before it answers; so
// the bytes lost are sometimes that PING, and the reset then cancels a
// request etcd has not applied yet. Measured over 20 Releases, on the
// embedded and on a real etcd: 15-16 applied and answered with an error,
// 3-4 not applied and answered with an error, 1 sent again by etcd's
// client because the reset came before the request left, and applied.
// The cases still check what they promise (never ErrLost, and the store
// agrees with the answer), but not always with a reply lost after the
// request was applied; TestReleaseWhoseReplyIsLostIsNotErrLost loses
// exactly that reply.
//
// Not parallel, so that the suite's cases (parallel among themselves,
// some of them timed) run alone.
func TestConformance(t *testing.T) {
	testenv.Slow(t)
	ttl := shortestTTL(t, testEndpoints)
	query := "?prefix=" + url.QueryEscape(randomPrefix())
	open := func(t testing.TB, endpoints string) lease.Locker {
		u := "etcd://" + endpoints + query
		l, err := lease.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("lease.Open(%q): %v", u, err)
		}
		return l
	}
	conformance.Run(t, conformance.Harness{
		New:         func(t testing.TB) lease.Locker { return open(t, strings.Join(testEndpoints, ",")) },
		TTL:         ttl,
		Granularity: time.Second,
		ExpiryLag:   expiryLag,
		Addr:        testEndpoints[0],
		NewAt:       open,
		// etcd's lessor judges expiry: no clock of the client's enters it.
		NewSkewed: func(t testing.TB, _ time.Duration) lease.Locker { return open(t, strings.Join(testEndpoints, ",")) },
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
