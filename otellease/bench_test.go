package otellease_test

import (
	"context"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/otellease"
)

// BenchmarkOverhead measures each operation on a memory Locker three ways,
// side by side: unwrapped (raw), wrapped with no-op providers (noop), and
// wrapped with the SDK (sdk: a meter provider with a reader, and a tracer
// provider that samples every span and exports them in batches to an
// exporter that drops them). The wrapper's overhead is the difference
// from raw. Run it with:
//
//	go test -run '^$' -bench Overhead -benchmem -count 5 ./otellease/
func BenchmarkOverhead(b *testing.B) {
	providers := []struct {
		name string
		wrap func(b *testing.B, l lease.Locker) lease.Locker
	}{
		{"raw", func(_ *testing.B, l lease.Locker) lease.Locker { return l }},
		{"noop", func(b *testing.B, l lease.Locker) lease.Locker {
			return wrapForBench(b, l, otellease.WithMeterProvider(metricnoop.NewMeterProvider()), otellease.WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"sdk", func(b *testing.B, l lease.Locker) lease.Locker {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() {
				_ = mp.Shutdown(context.Background())
				_ = tp.Shutdown(context.Background())
			})
			return wrapForBench(b, l, otellease.WithMeterProvider(mp), otellease.WithTracerProvider(tp))
		}},
	}
	ops := []struct {
		name string
		run  func(b *testing.B, l lease.Locker)
	}{
		{"acquire", func(b *testing.B, l lease.Locker) { // re-entrant: the same tenure, extended
			ctx := context.Background()
			for b.Loop() {
				if _, err := l.Acquire(ctx, "job", "me", time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"renew", func(b *testing.B, l lease.Locker) {
			ctx := context.Background()
			held, err := l.Acquire(ctx, "job", "me", time.Minute)
			for b.Loop() {
				if held, err = l.Renew(ctx, held, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"inspect", func(b *testing.B, l lease.Locker) {
			ctx := context.Background()
			if _, err := l.Acquire(ctx, "job", "me", time.Minute); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := l.Inspect(ctx, "job"); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"acquire+release", func(b *testing.B, l lease.Locker) { // a new tenure each time: two calls
			ctx := context.Background()
			for b.Loop() {
				held, err := l.Acquire(ctx, "job", "me", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx, held); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"busy", func(b *testing.B, l lease.Locker) { // ErrHeld
			ctx := context.Background()
			if _, err := l.Acquire(ctx, "job", "other", time.Minute); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := l.Acquire(ctx, "job", "me", time.Minute); err == nil {
					b.Fatal("acquired a busy lease")
				}
			}
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			for _, p := range providers {
				b.Run(p.name, func(b *testing.B) {
					b.ReportAllocs()
					op.run(b, p.wrap(b, memory.New()))
				})
			}
		})
	}
}

func wrapForBench(b *testing.B, l lease.Locker, opts ...otellease.Option) lease.Locker {
	w, err := otellease.Wrap(l, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	return w
}
