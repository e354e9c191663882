package otellease_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/otellease"
)

// Wrap the Locker once, where it is made, and use the wrapper everywhere,
// lease.Run included. Here the spans go to stdout as JSON; the metrics go
// to the global meter provider, which records nothing until the program
// installs one (otel.SetMeterProvider).
func ExampleWrap() {
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout), stdouttrace.WithPrettyPrint())
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(context.Background())

	locker, err := otellease.Wrap(memory.New(), otellease.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = lease.Run(context.Background(), locker, "nightly-report", time.Minute, func(ctx context.Context) error {
		return nil // the report
	})
	if err != nil {
		log.Fatal(err)
	}
	// Prints two spans, lease.acquire and lease.release, each with
	// lease.backend "memory", lease.name "nightly-report", lease.owner,
	// lease.token and lease.outcome ("acquired", then "released").
}

// The metrics, read back with the SDK's manual reader: a busy lease is an
// outcome, not an error.
func ExampleWithMeterProvider() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	locker, err := otellease.Wrap(memory.New(), otellease.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx := context.Background()
	held, _ := locker.Acquire(ctx, "report", "worker-1", time.Minute)
	_, _ = locker.Acquire(ctx, "report", "worker-2", time.Minute) // held by worker-1
	_ = locker.Release(ctx, held)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		fmt.Printf("%s (%s)\n", m.Name, m.Unit)
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "lease.operation.duration" {
			for _, dp := range h.DataPoints {
				op, _ := dp.Attributes.Value("lease.operation")
				out, _ := dp.Attributes.Value("lease.outcome")
				fmt.Printf("  %s %s: %d\n", op.AsString(), out.AsString(), dp.Count)
			}
		}
	}
	// Unordered output:
	// lease.operation.duration (s)
	//   acquire acquired: 1
	//   acquire held: 1
	//   release released: 1
	// lease.held ({lease})
	// lease.hold.duration (s)
}
