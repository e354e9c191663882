package otellease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/otellease"
)

// A wrapped Locker keeps every promise of the conformance suite: the
// wrapper changes no behaviour. The suite runs lease.Run over it too.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name         string
		manual, noop bool
	}{{"system clock", false, false}, {"manual clock", true, false}, {"no-op providers", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			store := memory.New()
			h := conformance.Harness{TTL: 100 * time.Millisecond}
			if c.manual {
				clock := memory.NewManualClock(time.Now())
				store = memory.New(memory.WithClock(clock))
				h = conformance.Harness{TTL: time.Second, Advance: clock.Advance}
			}
			opts := []otellease.Option{otellease.WithMeterProvider(r.mp), otellease.WithTracerProvider(r.tp)}
			if c.noop {
				// Nothing records: every call takes the wrapper's quiet path.
				opts = []otellease.Option{otellease.WithMeterProvider(metricnoop.NewMeterProvider()), otellease.WithTracerProvider(tracenoop.NewTracerProvider())}
			}
			h.New = func(tb testing.TB) lease.Locker {
				w, err := otellease.Wrap(store.Share(), opts...)
				if err != nil {
					tb.Fatalf("Wrap: %v", err)
				}
				return w
			}
			// After the suite's subtests, which may run in parallel, after
			// this function returns (and before the rig shuts down): it
			// recorded every operation the suite made.
			t.Cleanup(func() {
				if c.noop {
					return
				}
				ms := r.collect(t)
				for _, op := range []string{"acquire", "renew", "renew_batch", "release", "inspect", "list", "force_release", "watch"} {
					if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", op)); n == 0 {
						t.Errorf("no lease.operation.duration measurement for %s", op)
					}
				}
				if n := sumValue(t, ms, "lease.losses"); n == 0 {
					t.Errorf("no lease.losses after a suite that loses leases on purpose")
				}
			})
			conformance.Run(t, h)
		})
	}
}

// lease.Run over a wrapped Locker: its renewals go through RenewBatch,
// each lands with most of the tenure to spare, and the release ends the
// hold without a loss.
func TestRunRenewsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		w := r.wrap(t, memory.New())
		const ttl = 3 * time.Second
		err := lease.Run(t.Context(), w, "job", ttl, func(ctx context.Context) error {
			ms := r.collect(t)
			if n := sumValue(t, ms, "lease.held"); n != 1 {
				t.Errorf("lease.held = %d while Run's fn runs, want 1", n)
			}
			time.Sleep(10 * time.Second)
			return nil
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		ms := r.collect(t)
		renewals := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "renew_batch"), kv("lease.outcome", "renewed"))
		if renewals < 8 || renewals > 12 {
			t.Errorf("%d renewals over 10s with a ttl of 3s, want about 10", renewals)
		}
		if n := histCount(t, ms, "lease.renewal.slack"); n != renewals {
			t.Errorf("lease.renewal.slack has %d measurements, want one per renewal (%d)", n, renewals)
		}
		// Every renewal came about ttl/3 after the last, so about two
		// thirds of the tenure was left.
		if mean := histSum(t, ms, "lease.renewal.slack") / float64(renewals); mean < 1.5 || mean > 2.5 {
			t.Errorf("mean slack %.2fs, want about 2s", mean)
		}
		if n := histCount(t, ms, "lease.hold.duration", kv("lease.outcome", "released")); n != 1 {
			t.Errorf("lease.hold.duration{released} has %d measurements, want 1", n)
		}
		if got := histSum(t, ms, "lease.hold.duration"); got != 10 {
			t.Errorf("held for %vs, want 10s", got)
		}
		if n := sumValue(t, ms, "lease.losses"); n != 0 {
			t.Errorf("lease.losses = %d, want 0", n)
		}
		if n := sumValue(t, ms, "lease.held"); n != 0 {
			t.Errorf("lease.held = %d after Run, want 0", n)
		}
	})
}

// lease.Run whose lease is force-released while fn runs: the renewal that
// finds it lost counts one loss, and Run's Release, which finds it lost
// again, counts nothing more.
func TestRunLosesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		store := memory.New()
		w := r.wrap(t, store)
		err := lease.Run(t.Context(), w, "job", 3*time.Second, func(ctx context.Context) error {
			if _, err := store.ForceRelease(ctx, "job"); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		})
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Run: %v, want ErrLost", err)
		}
		ms := r.collect(t)
		if n := sumValue(t, ms, "lease.losses", kv("lease.loss.cause", "renew_lost")); n != 1 {
			t.Errorf("lease.losses{renew_lost} = %d, want 1", n)
		}
		if n := sumValue(t, ms, "lease.losses"); n != 1 {
			t.Errorf("lease.losses = %d in all, want 1", n)
		}
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "release"), kv("lease.outcome", "lost")); n != 1 {
			t.Errorf("%d releases found the lease lost, want 1", n)
		}
	})
}

// lease.Run's WithFairWait needs a FairAcquirer: over a wrapped memory
// Locker it queues, and gets the name when its holder lets go.
func TestRunFairWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		w := r.wrap(t, memory.New())
		ctx := t.Context()
		holder := must(w.Acquire(ctx, "job", "holder", 10*time.Second))(t)
		time.AfterFunc(2*time.Second, func() { _ = w.Release(ctx, holder) })
		ran := false
		err := lease.Run(ctx, w, "job", 10*time.Second, func(context.Context) error {
			ran = true
			return nil
		}, lease.WithFairWait(time.Minute))
		if err != nil || !ran {
			t.Fatalf("Run with WithFairWait: %v (ran: %v)", err, ran)
		}
		ms := r.collect(t)
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "acquire_queued"), kv("lease.outcome", "held")); n == 0 {
			t.Errorf("no queued acquire found the name held")
		}
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "acquire_queued"), kv("lease.outcome", "acquired")); n != 1 {
			t.Errorf("%d queued acquires got the name, want 1", n)
		}
	})
}

// stalled is a memory Locker whose renewals fail, as a store that has
// become too slow would.
type stalled struct{ *memory.Locker }

func (stalled) RenewBatch(_ context.Context, reqs []lease.RenewRequest) []lease.RenewResult {
	out := make([]lease.RenewResult, len(reqs))
	for i := range out {
		out[i].Err = errors.New("i/o timeout")
	}
	return out
}

// lease.Run whose renewals fail until the Deadline passes: Run's watchdog
// ends fn, which the wrapper cannot see; it counts the loss (cause
// deadline) at Run's Release, which comes after the Deadline.
func TestRunDeadlineLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		w := r.wrap(t, stalled{memory.New()}, otellease.WithBackend("memory"))
		err := lease.Run(t.Context(), w, "job", 3*time.Second, func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		})
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Run: %v, want ErrLost", err)
		}
		ms := r.collect(t)
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "renew_batch"), kv("lease.outcome", "error")); n == 0 {
			t.Errorf("no failed renewal recorded")
		}
		if n := sumValue(t, ms, "lease.losses", kv("lease.loss.cause", "deadline")); n != 1 {
			t.Errorf("lease.losses{deadline} = %d, want 1", n)
		}
		if n := sumValue(t, ms, "lease.losses"); n != 1 {
			t.Errorf("lease.losses = %d in all, want 1", n)
		}
		if n := histCount(t, ms, "lease.hold.duration", kv("lease.outcome", "lost")); n != 1 {
			t.Errorf("lease.hold.duration{lost} has %d measurements, want 1", n)
		}
	})
}

// With no provider given, the wrapper records through the global ones:
// nothing while they are the default no-ops (not even the bookkeeping of
// tenures), and everything once the program installs an SDK, even after
// Wrap. This test sets the global providers for the rest of the process;
// no other test uses them.
func TestGlobalProviders(t *testing.T) {
	if _, set := otel.GetTracerProvider().(*sdktrace.TracerProvider); set {
		t.Skip("the global providers delegate to the first SDK installed in a process, and a previous run (-count) installed one")
	}
	w, err := otellease.Wrap(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := t.Context()
	before := must(w.Acquire(ctx, "before", "me", time.Minute))(t)

	r := newRig(t)
	otel.SetMeterProvider(r.mp)
	otel.SetTracerProvider(r.tp)
	ms := r.collect(t)
	if n := histCount(t, ms, "lease.operation.duration"); n != 0 {
		t.Errorf("%d measurements recorded before the SDK was installed, want 0", n)
	}
	if n := sumValue(t, ms, "lease.held"); n != 0 {
		t.Errorf("lease.held = %d, want 0: a tenure acquired while nothing recorded is not followed", n)
	}
	if n := len(r.spans.GetSpans()); n != 0 {
		t.Errorf("%d spans before the SDK was installed, want 0", n)
	}

	after := must(w.Acquire(ctx, "after", "me", time.Minute))(t)
	if err := w.Release(ctx, before); err != nil {
		t.Fatal(err)
	}
	ms = r.collect(t)
	if n := histCount(t, ms, "lease.operation.duration"); n != 2 {
		t.Errorf("%d measurements after the SDK was installed, want 2", n)
	}
	if n := sumValue(t, ms, "lease.held"); n != 1 {
		t.Errorf("lease.held = %d, want 1 (after)", n)
	}
	if n := histCount(t, ms, "lease.hold.duration"); n != 0 {
		t.Errorf("lease.hold.duration has %d measurements, want 0 (before was not followed)", n)
	}
	r.span(t, "lease.acquire")
	r.span(t, "lease.release")
	_ = after
}
