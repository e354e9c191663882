package sqllease

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAcquireRelease measures one Acquire and one Release of a free
// name per iteration, on each available dialect.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.fn(b)
			l := s.newLocker(b)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				got, err := l.Acquire(ctx, fmt.Sprint("bench-", i%64), "a", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAcquireHeld measures an Acquire that finds the name held (the
// HeldError path).
func BenchmarkAcquireHeld(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.fn(b)
			l := s.newLocker(b)
			ctx := context.Background()
			if _, err := l.Acquire(ctx, "held", "a", time.Hour); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := l.Acquire(ctx, "held", "b", time.Hour); err == nil {
					b.Fatal("second owner acquired a held name")
				}
			}
		})
	}
}

var benchStores = []struct {
	name string
	fn   func(testing.TB) *testStore
}{{"sqlite", sqliteStore}, {"postgresql", postgresStore}, {"mysql", mysqlStore}}
