package etcdlease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testenv"
)

// TestExpiryLag measures how long after its TTL etcd deletes an expired
// tenure's key, the lag that conformance.Harness.ExpiryLag allows for
// (expiryLag). It only fails if a tenure never ends; run it with -v to
// see the numbers.
func TestExpiryLag(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	l, _ := newLocker(t)
	const samples = 8
	lags := make([]time.Duration, samples)
	var wg sync.WaitGroup
	for i := range samples {
		wg.Go(func() {
			ctx := context.Background()
			name := uniqueName("expiry-lag")
			// Stagger the grants across the lessor's 500ms check interval.
			time.Sleep(time.Duration(i) * 500 * time.Millisecond / samples)
			start := time.Now()
			got, err := l.Acquire(ctx, name, "owner-a", time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			expires := start.Add(got.Expires.Sub(start.Round(0)))
			for {
				r, err := l.s.client.Get(ctx, l.s.key(name))
				if err != nil {
					t.Error(err)
					return
				}
				if len(r.Kvs) == 0 {
					lags[i] = time.Since(expires)
					return
				}
				if time.Since(start) > 10*time.Second {
					t.Errorf("a 1s tenure still exists after %s", time.Since(start))
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	var maxLag time.Duration
	for _, d := range lags {
		maxLag = max(maxLag, d)
	}
	t.Logf("etcd deleted tenures asked for 1s %v after their granted TTL ran out (max %s; the conformance harness allows %s)", lags, maxLag, expiryLag)
}
