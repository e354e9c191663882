package otellease_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
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
// side by side: unwrapped (raw), wrapped with the global providers that no
// SDK was installed into (global), wrapped with no-op providers (noop), and
// wrapped with the SDK (sdk: a meter provider with a reader, and a tracer
// provider that samples every span and exports them in batches to an
// exporter that drops them). The wrapper's overhead is the difference
// from raw. Besides ns/op (wall clock) it reports cpu-ns/op, the CPU time
// of the whole process per call (the SDK's batching goroutine and the
// garbage collector included), which a loaded machine distorts less. Run
// it with:
//
//	go test -run '^$' -bench 'Overhead|SDKFloor' -benchmem -count 5 ./otellease/
func BenchmarkOverhead(b *testing.B) {
	providers := []struct {
		name string
		wrap func(b *testing.B, l lease.Locker) lease.Locker
	}{
		{"raw", func(_ *testing.B, l lease.Locker) lease.Locker { return l }},
		{"global", func(b *testing.B, l lease.Locker) lease.Locker {
			// What a program that never installs an SDK pays.
			if _, set := otel.GetTracerProvider().(*sdktrace.TracerProvider); set {
				b.Skip("TestGlobalProviders installed global providers in this process; run the benchmarks with -run '^$'")
			}
			return wrapForBench(b, l)
		}},
		{"noop", func(b *testing.B, l lease.Locker) lease.Locker {
			return wrapForBench(b, l, otellease.WithMeterProvider(metricnoop.NewMeterProvider()), otellease.WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"sdk", func(b *testing.B, l lease.Locker) lease.Locker {
			mp, tp := sdkProviders(b)
			return wrapForBench(b, l, otellease.WithMeterProvider(mp), otellease.WithTracerProvider(tp))
		}},
	}
	ops := []struct {
		name string
		run  func(b *testing.B, l lease.Locker)
	}{
		{"acquire", func(b *testing.B, l lease.Locker) { // re-entrant: the same tenure, extended
			ctx := context.Background()
			loop(b, func() {
				if _, err := l.Acquire(ctx, "job", "me", time.Minute); err != nil {
					b.Fatal(err)
				}
			})
		}},
		{"renew", func(b *testing.B, l lease.Locker) {
			ctx := context.Background()
			held, err := l.Acquire(ctx, "job", "me", time.Minute)
			loop(b, func() {
				if held, err = l.Renew(ctx, held, time.Minute); err != nil {
					b.Fatal(err)
				}
			})
		}},
		{"inspect", func(b *testing.B, l lease.Locker) {
			ctx := context.Background()
			if _, err := l.Acquire(ctx, "job", "me", time.Minute); err != nil {
				b.Fatal(err)
			}
			loop(b, func() {
				if _, err := l.Inspect(ctx, "job"); err != nil {
					b.Fatal(err)
				}
			})
		}},
		{"acquire+release", func(b *testing.B, l lease.Locker) { // a new tenure each time: two calls
			ctx := context.Background()
			loop(b, func() {
				held, err := l.Acquire(ctx, "job", "me", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx, held); err != nil {
					b.Fatal(err)
				}
			})
		}},
		{"busy", func(b *testing.B, l lease.Locker) { // ErrHeld
			ctx := context.Background()
			if _, err := l.Acquire(ctx, "job", "other", time.Minute); err != nil {
				b.Fatal(err)
			}
			loop(b, func() {
				if _, err := l.Acquire(ctx, "job", "me", time.Minute); err == nil {
					b.Fatal("acquired a busy lease")
				}
			})
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

// sdkProviders is the SDK set-up of BenchmarkOverhead's sdk case.
func sdkProviders(b *testing.B) (*sdkmetric.MeterProvider, *sdktrace.TracerProvider) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	return mp, tp
}

// loop runs body b.N times and reports the process's CPU time per call.
func loop(b *testing.B, body func()) {
	before := cpuTime(b)
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSDKFloor is what any instrumentation of one call costs with
// the SDK set-up of BenchmarkOverhead, without the wrapper: one span
// started and ended, and one histogram measurement, around a memory
// Inspect. Compare it with BenchmarkOverhead/inspect/sdk.
func BenchmarkSDKFloor(b *testing.B) {
	mp, tp := sdkProviders(b)
	tracer := tp.Tracer("floor")
	hist, err := mp.Meter("floor").Float64Histogram("floor.duration")
	if err != nil {
		b.Fatal(err)
	}
	l := memory.New()
	ctx := context.Background()
	if _, err := l.Acquire(ctx, "job", "me", time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	loop(b, func() {
		ctx, span := tracer.Start(ctx, "inspect")
		start := time.Now()
		if _, err := l.Inspect(ctx, "job"); err != nil {
			b.Fatal(err)
		}
		hist.Record(ctx, time.Since(start).Seconds())
		span.End()
	})
}
