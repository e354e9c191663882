// Command observability shows what otellease records, as Prometheus
// scrapes it.
//
// It wraps a Locker (memory by default; -backend URL for another store)
// with otellease, sends the metrics through the
// OpenTelemetry SDK to a Prometheus registry (the OTel Prometheus
// exporter), and plays a few minutes of a service's life in a second or
// two: three instances race for a nightly report (one runs it, renewing
// its lease, the others find it held), and an operator force-releases a
// reindex job's lease under its worker, which loses it. Then it scrapes
// the registry over HTTP and prints the lease metrics.
//
// With -listen it keeps serving /metrics afterwards, for a real
// Prometheus to scrape.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all" // the stores --backend may name
	"github.com/leasekit/lease/otellease"
)

func main() {
	listen := flag.String("listen", "", "after the demo, serve /metrics on this address (e.g. :9464) until killed")
	backend := flag.String("backend", envOr("LEASE_BACKEND", "mem://"), "the lease store's URL (any lease.Open URL: mem://, redis://127.0.0.1:6379, ...)")
	flag.Parse()
	reg := prometheus.NewRegistry()
	if err := run(context.Background(), *backend, reg, os.Stdout); err != nil {
		log.Fatal(err)
	}
	if *listen != "" {
		http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		log.Printf("serving http://%s/metrics", *listen)
		log.Fatal(http.ListenAndServe(*listen, nil))
	}
}

// envOr is $name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// run plays the scenario on a wrapped Locker of the store at backend whose
// metrics go to reg, and prints the lease_ lines of a scrape of reg to
// out.
func run(ctx context.Context, backend string, reg *prometheus.Registry, out io.Writer) error {
	// The OTel side: an SDK meter provider whose reader is the Prometheus
	// exporter, registered with reg. Target and scope info are left out
	// to keep the picture small.
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	// The one line a program adds: wrap the Locker where it is made.
	store, err := lease.Open(ctx, backend)
	if err != nil {
		return err
	}
	locker, err := otellease.Wrap(store, otellease.WithMeterProvider(mp))
	if err != nil {
		store.Close()
		return err
	}
	defer locker.Close()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}

	// Three instances fire the nightly report at once: one runs it for
	// 1.5s, renewing its 2s lease twice; the others find it held.
	for i := range 3 {
		wg.Go(func() {
			err := lease.Run(ctx, locker, "nightly-report", 2*time.Second, func(ctx context.Context) error {
				time.Sleep(1500 * time.Millisecond)
				return nil
			}, lease.WithOwner(fmt.Sprintf("instance-%d", i+1)))
			if err != nil && !errors.Is(err, lease.ErrHeld) {
				fail(fmt.Errorf("nightly-report: %w", err))
			}
		})
	}

	// A reindex job whose lease an operator clears while it works: its
	// next renewal finds the lease lost and Run stops the work.
	started := make(chan struct{})
	wg.Go(func() {
		err := lease.Run(ctx, locker, "reindex", 2*time.Second, func(ctx context.Context) error {
			close(started)
			<-ctx.Done() // the work stops when the lease is lost
			return nil
		})
		if !errors.Is(err, lease.ErrLost) {
			fail(fmt.Errorf("reindex: got %v, want the lease lost", err))
		}
	})
	<-started
	if _, err := locker.(lease.ForceReleaser).ForceRelease(ctx, "reindex"); err != nil {
		fail(err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// Scrape reg as Prometheus would, and print the lease metrics.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "lease_") {
			fmt.Fprintln(out, line)
		}
	}
	return sc.Err()
}
