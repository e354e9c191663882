package etcdfence_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease/fence/etcdfence"
)

// BenchmarkWrite compares, side by side on the shared server (the
// embedded one, or LEASE_TEST_ETCD's), a plain Put with the same Put
// guarded by the fence (one Txn), and the check alone. Compare the
// ratios, measured in one run, with the load average.
func BenchmarkWrite(b *testing.B) {
	prefix := randomPrefix("bench")
	deletePrefix(b, testEndpoints, prefix)
	c := newClient(b, testEndpoints, nil)
	f, err := etcdfence.New(c, etcdfence.WithPrefix(prefix+"fence/"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	key := prefix + "data/report"
	if _, err := f.Do(ctx, "bench", 10, clientv3.OpPut(key, "v")); err != nil {
		b.Fatal(err)
	}
	b.Run("unguarded-put", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Put(ctx, key, "v"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded-put", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.Do(ctx, "bench", 10, clientv3.OpPut(key, "v")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check-alone", func(b *testing.B) {
		for b.Loop() {
			if err := f.Check(ctx, "bench", 10); err != nil {
				b.Fatal(err)
			}
		}
	})
}
