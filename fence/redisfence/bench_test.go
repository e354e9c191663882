package redisfence_test

import (
	"context"
	"testing"

	"github.com/leasekit/lease/fence/redisfence"
)

// BenchmarkWrite compares, side by side on the server in LEASE_TEST_REDIS,
// a plain SET with the same SET guarded by the fence (one EVALSHA), and
// the check alone. Compare the ratios, measured in one run, with the load
// average.
func BenchmarkWrite(b *testing.B) {
	c := realClients(b)(b)
	tag := randomTag("bench")
	cleanupTag(b, c, tag)
	ctx := context.Background()
	f, err := redisfence.New(c, tag)
	if err != nil {
		b.Fatal(err)
	}
	key := "{" + tag + "}:body"
	if _, err := f.Do(ctx, "bench", 10, redisfence.Cmd("SET", key, "v")); err != nil {
		b.Fatal(err)
	}
	b.Run("unguarded-set", func(b *testing.B) {
		for b.Loop() {
			if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded-set", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.Do(ctx, "bench", 10, redisfence.Cmd("SET", key, "v")); err != nil {
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
