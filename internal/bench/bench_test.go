package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/etcdtest"
)

type target struct{ name, url, env string }

func targets(b *testing.B) []target {
	dir := b.TempDir()
	return []target{
		{"memory", "mem://", ""},
		{"sqlite", "sqlite://" + filepath.Join(dir, "bench.db"), ""},
		{"postgres", os.Getenv("LEASE_TEST_POSTGRES"), "LEASE_TEST_POSTGRES"},
		{"mysql", os.Getenv("LEASE_TEST_MYSQL"), "LEASE_TEST_MYSQL"},
		{"redis", os.Getenv("LEASE_TEST_REDIS"), "LEASE_TEST_REDIS"},
		{"etcd", "etcd", ""},
	}
}

func open(b *testing.B, t target) lease.Locker {
	b.Helper()
	url := t.url
	if t.name == "etcd" {
		url = "etcd://" + strings.Join(etcdtest.Endpoints(b), ",")
	}
	if url == "" {
		b.Skipf("%s is not set", t.env)
	}
	if t.name == "redis" || t.name == "etcd" {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += fmt.Sprintf("%sprefix=bench-%d/", sep, time.Now().UnixNano())
	}
	l, err := lease.Open(context.Background(), url)
	if err != nil {
		b.Fatalf("Open(%s): %v", driver.Redact(url), err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkAcquireRelease measures one tenure: Acquire of a free name,
// then Release.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, t := range targets(b) {
		b.Run(t.name, func(b *testing.B) {
			l := open(b, t)
			ctx := context.Background()
			name := fmt.Sprintf("bench/%d", time.Now().UnixNano())
			owner := lease.NewOwner()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := l.Acquire(ctx, name, owner, time.Minute)
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

// BenchmarkRenew measures the operation a holder repeats: Renew.
func BenchmarkRenew(b *testing.B) {
	for _, t := range targets(b) {
		b.Run(t.name, func(b *testing.B) {
			l := open(b, t)
			ctx := context.Background()
			held, err := l.Acquire(ctx, fmt.Sprintf("bench/%d", time.Now().UnixNano()), lease.NewOwner(), time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if held, err = l.Renew(ctx, held, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAcquireHeld measures the busy answer that every non-holder
// gets: Acquire of a name another owner holds.
func BenchmarkAcquireHeld(b *testing.B) {
	for _, t := range targets(b) {
		b.Run(t.name, func(b *testing.B) {
			l := open(b, t)
			ctx := context.Background()
			name := fmt.Sprintf("bench/%d", time.Now().UnixNano())
			if _, err := l.Acquire(ctx, name, "holder", time.Minute); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Acquire(ctx, name, "other", time.Minute); err == nil {
					b.Fatal("acquired a held lease")
				}
			}
		})
	}
}
