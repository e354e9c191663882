package otellease_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/internal/line"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/otellease"
)

// A wrapped Locker keeps every promise of the conformance suite: the
// wrapper changes no behaviour. The suite runs lease.Run over it too.
func TestConformance(t *testing.T) {
	testenv.Slow(t)
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
// lockerWithoutBatch is a memory Locker with no RenewBatch (an interface
// field promotes only lease.Locker's methods).
type lockerWithoutBatch struct{ lease.Locker }

// lease.Run over a wrapper whose Locker has no RenewBatch renews through
// Renew: the wrapper's RenewBatch would fail, and its Can says so.
func TestRunRenewsThroughRenewWithoutBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		w := r.wrap(t, lockerWithoutBatch{memory.New()})
		err := lease.Run(t.Context(), w, "job", 3*time.Second, func(ctx context.Context) error {
			time.Sleep(10 * time.Second)
			return ctx.Err()
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		ms := r.collect(t)
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "renew"), kv("lease.outcome", "renewed")); n < 8 {
			t.Errorf("%d renewals through Renew over 10s with a ttl of 3s, want about 10", n)
		}
	})
}

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

// lease.Run's WithFairWait works through wrappers: over two wrapped
// Lockers of one memory store, the waiters get the name in the order they
// came, each woken when the name is freed for it, and every attempt is an
// Acquire that the wrapper records.
func TestRunFairWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		store := memory.New()
		ctx := t.Context()
		holder := must(store.Acquire(ctx, "job", "holder", time.Minute))(t)
		start := time.Now()
		var (
			mu    sync.Mutex
			order []string
			got   = map[string]time.Duration{}
		)
		var wg sync.WaitGroup
		wait := func(owner string, after time.Duration) {
			w := r.wrap(t, store.Share())
			wg.Go(func() {
				time.Sleep(after)
				err := lease.Run(ctx, w, "job", 10*time.Second, func(context.Context) error {
					mu.Lock()
					order = append(order, owner)
					got[owner] = time.Since(start)
					mu.Unlock()
					time.Sleep(time.Second)
					return nil
				}, lease.WithFairWait(time.Minute), lease.WithOwner(owner))
				if err != nil {
					t.Errorf("Run of %s with WithFairWait: %v", owner, err)
				}
			})
		}
		wait("first", 0)
		wait("second", time.Second)
		time.Sleep(3 * time.Second)
		if err := store.Release(ctx, holder); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if !slices.Equal(order, []string{"first", "second"}) {
			t.Fatalf("the waiters got the name in the order %v, want first, second", order)
		}
		// Woken, not polled: each got the name the moment it was freed
		// for it (attempts not woken come every 2s, a quarter of the ttl).
		if got["first"] != 3*time.Second || got["second"] != 4*time.Second {
			t.Errorf("first got the name after %v, second after %v; want 3s and 4s", got["first"], got["second"])
		}
		ms := r.collect(t)
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "acquire"), kv("lease.outcome", "held")); n < 2 {
			t.Errorf("%d waiting attempts found the name held, want at least one of each waiter", n)
		}
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "acquire"), kv("lease.outcome", "acquired")); n != 2 {
			t.Errorf("%d attempts got the name, want 2", n)
		}
		for _, owner := range []string{"first", "second"} {
			var held, acquired int
			for _, s := range r.spans.GetSpans() {
				if s.Name != "lease.acquire" || attr(s, "lease.owner") != owner {
					continue
				}
				switch attr(s, "lease.outcome") {
				case "held":
					held++
				case "acquired":
					acquired++
					if at := s.StartTime.Sub(start); at != got[owner] {
						t.Errorf("%s's acquiring span started after %v, want %v", owner, at, got[owner])
					}
				}
			}
			if held == 0 || acquired != 1 {
				t.Errorf("%s: %d lease.acquire spans held and %d acquired, want some and 1", owner, held, acquired)
			}
		}
	})
}

// attempts is a memory Locker that notes, for each Acquire, whether its
// context carried a waiter's place (internal/line) and the span it was
// called under.
type attempts struct {
	*memory.Locker
	mu    sync.Mutex
	calls []attempt
}

type attempt struct {
	waiting bool
	span    trace.SpanID
}

func (a *attempts) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	a.mu.Lock()
	a.calls = append(a.calls, attempt{line.FromContext(ctx) != nil, trace.SpanContextFromContext(ctx).SpanID()})
	a.mu.Unlock()
	return a.Locker.Acquire(ctx, name, owner, ttl)
}

// lease.Run's waiting does not bypass a wrapper's Acquire: every attempt
// of a Run that waits goes through the wrapper, with the waiter's place in
// its context, to the wrapped Locker's Acquire, which keeps its line (the
// waiter is woken by the release), and each attempt, the acquiring one
// included, is recorded as an acquire span.
func TestRunWaitGoesThroughAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		store := memory.New()
		ctx := t.Context()
		holder := must(store.Acquire(ctx, "job", "holder", time.Minute))(t)
		inner := &attempts{Locker: store.Share()}
		w := r.wrap(t, inner)
		start := time.Now()
		time.AfterFunc(5*time.Second, func() { _ = store.Release(ctx, holder) })
		var ranAt time.Duration
		err := lease.Run(ctx, w, "job", 10*time.Second, func(context.Context) error {
			ranAt = time.Since(start)
			return nil
		}, lease.WithWait(time.Minute), lease.WithOwner("waiter"))
		if err != nil {
			t.Fatalf("Run with WithWait: %v", err)
		}
		// Attempts not woken come every 2s (a quarter of the ttl): at 0,
		// 2s and 4s the name was held, and the release at 5s woke the
		// waiter.
		if ranAt != 5*time.Second {
			t.Errorf("Run got the name after %v, want 5s: the release should wake it", ranAt)
		}
		var spans []tracetest.SpanStub
		for _, s := range r.spans.GetSpans() {
			if s.Name == "lease.acquire" {
				spans = append(spans, s)
			}
		}
		if len(spans) != len(inner.calls) || len(spans) < 2 {
			t.Fatalf("%d lease.acquire spans for %d Acquires of the wrapped Locker, want one each, at least 2", len(spans), len(inner.calls))
		}
		for i, c := range inner.calls {
			s := spans[i]
			if !c.waiting {
				t.Errorf("attempt %d reached the wrapped Locker without the waiter's place in its context", i)
			}
			if c.span != s.SpanContext.SpanID() {
				t.Errorf("attempt %d was not made under its lease.acquire span", i)
			}
			want := map[string]string{"lease.name": "job", "lease.owner": "waiter", "lease.outcome": "held", "lease.holder": "holder"}
			if i == len(inner.calls)-1 {
				want = map[string]string{"lease.name": "job", "lease.owner": "waiter", "lease.outcome": "acquired", "lease.token": "*"}
				if at := s.StartTime.Sub(start); at != 5*time.Second {
					t.Errorf("the acquiring attempt started after %v, want 5s", at)
				}
			}
			checkSpan(t, s, want, false)
		}
		ms := r.collect(t)
		if n := histCount(t, ms, "lease.operation.duration", kv("lease.operation", "acquire"), kv("lease.outcome", "held")); n != uint64(len(spans)-1) {
			t.Errorf("%d acquire measurements held, want %d", n, len(spans)-1)
		}
		if n := histCount(t, ms, "lease.hold.duration", kv("lease.outcome", "released")); n != 1 {
			t.Errorf("lease.hold.duration{released} has %d measurements, want 1: the waited-for tenure is followed", n)
		}
	})
}

// A wrapper does not pretend to keep a line of waiters: over a Locker
// that keeps none, lease.Run's WithFairWait fails with an error matching
// errors.ErrUnsupported after one recorded attempt.
func TestRunFairWaitNeedsALine(t *testing.T) {
	r := newRig(t)
	w := r.wrap(t, busy{failing{errors.New("unused")}, "holder"})
	err := lease.Run(t.Context(), w, "job", 10*time.Second, func(context.Context) error {
		t.Error("fn ran")
		return nil
	}, lease.WithFairWait(time.Minute))
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Run with WithFairWait over a Locker without a line: %v, want an error matching errors.ErrUnsupported", err)
	}
	checkSpan(t, r.span(t, "lease.acquire"), map[string]string{"lease.outcome": "held", "lease.holder": "holder"}, false)
}

// stalled is a memory Locker whose renewals fail, as a store that has
// become too slow would.
type stalled struct{ *memory.Locker }

func (stalled) RenewBatch(_ context.Context, leases []lease.Lease, _ []time.Duration) ([]lease.Lease, []error) {
	errs := make([]error, len(leases))
	for i := range errs {
		errs[i] = errors.New("i/o timeout")
	}
	return make([]lease.Lease, len(leases)), errs
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
