package otellease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

// The instruments have the names, units, kinds and descriptions the
// package documentation promises.
func TestInstruments(t *testing.T) {
	r := newRig(t)
	w := r.wrap(t, memory.New())
	ctx := t.Context()
	a := must(w.Acquire(ctx, "job", "owner-a", time.Minute))(t)
	a = must(w.Renew(ctx, a, time.Minute))(t)
	if err := w.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := must(w.Acquire(ctx, "job", "owner-b", time.Minute))(t)
	must(w.(lease.ForceReleaser).ForceRelease(ctx, "job"))(t)
	wantErr(t, w.Release(ctx, b), lease.ErrLost)
	ms := r.collect(t)
	for _, want := range []struct {
		name, unit, kind string
	}{
		{"lease.operation.duration", "s", "histogram"},
		{"lease.held", "{lease}", "updown"},
		{"lease.hold.duration", "s", "histogram"},
		{"lease.renewal.slack", "s", "histogram"},
		{"lease.losses", "{loss}", "counter"},
	} {
		m, ok := ms[want.name]
		if !ok {
			t.Errorf("no metric %s; have %v", want.name, keys(ms))
			continue
		}
		if m.Unit != want.unit {
			t.Errorf("%s has unit %q, want %q", want.name, m.Unit, want.unit)
		}
		if m.Description == "" {
			t.Errorf("%s has no description", want.name)
		}
		kind := "?"
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			kind = "histogram"
		case metricdata.Sum[int64]:
			kind = "updown"
			if d.IsMonotonic {
				kind = "counter"
			}
		}
		if kind != want.kind {
			t.Errorf("%s is a %T (%s), want a %s", want.name, m.Data, kind, want.kind)
		}
	}
	if len(ms) != 5 {
		t.Errorf("metrics %v, want exactly the five above", keys(ms))
	}
	// The operation duration's buckets suit store calls, in seconds.
	h := ms["lease.operation.duration"].Data.(metricdata.Histogram[float64])
	if b := h.DataPoints[0].Bounds; len(b) == 0 || b[0] > 0.0001 || b[len(b)-1] < 5 {
		t.Errorf("lease.operation.duration bounds %v, want from under 100µs to over 5s", b)
	}
}

func keys(ms map[string]metricdata.Metrics) []string {
	var k []string
	for n := range ms {
		k = append(k, n)
	}
	return k
}

// lease.held counts the tenures held through the wrapper: a re-entrant
// Acquire is the same tenure, a release ends it, one that lease.Run
// waited for counts as any other, and tenures acquired without the
// wrapper are not counted.
func TestHeld(t *testing.T) {
	r := newRig(t)
	store := memory.New()
	w := r.wrap(t, store)
	ctx := t.Context()
	held := func() int64 { return sumValue(t, r.collect(t), "lease.held", kv("lease.backend", "memory")) }

	if n := held(); n != 0 {
		t.Fatalf("lease.held = %d before any Acquire, want 0", n)
	}
	a := must(w.Acquire(ctx, "a", "me", time.Minute))(t)
	must(w.Acquire(ctx, "a", "me", time.Minute))(t) // re-entrant: the same tenure
	b := must(w.Acquire(ctx, "b", "me", time.Minute))(t)
	must(store.Acquire(ctx, "c", "me", time.Minute))(t) // not through the wrapper
	// A tenure that lease.Run takes by waiting, through the wrapper's
	// Acquire, is followed too, until Run releases it.
	err := lease.Run(ctx, w, "q", time.Minute, func(context.Context) error {
		if n := held(); n != 3 {
			t.Errorf("lease.held = %d with a, b and q held, want 3", n)
		}
		return nil
	}, lease.WithFairWait(time.Minute))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := w.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 1 {
		t.Fatalf("lease.held = %d after releasing a, want 1", n)
	}
	if _, err := w.(lease.ForceReleaser).ForceRelease(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	_, err = w.Renew(ctx, b, time.Minute)
	wantErr(t, err, lease.ErrLost)
	ms := r.collect(t)
	if n := sumValue(t, ms, "lease.held"); n != 0 {
		t.Fatalf("lease.held = %d after b was lost, want 0", n)
	}
	if n := histCount(t, ms, "lease.hold.duration", kv("lease.outcome", "released")); n != 2 {
		t.Errorf("lease.hold.duration{released} has %d measurements, want 2 (q and a)", n)
	}
	if n := histCount(t, ms, "lease.hold.duration", kv("lease.outcome", "lost")); n != 1 {
		t.Errorf("lease.hold.duration{lost} has %d measurements, want 1 (b)", n)
	}
}

// Each loss is counted once, by its cause; slack is recorded for each
// renewal that lands before the Deadline. The bubble's clock makes the
// Deadlines exact.
func TestLosses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		store := memory.New()
		w := r.wrap(t, store)
		ctx := t.Context()
		fr := w.(lease.ForceReleaser)
		losses := func(ms map[string]metricdata.Metrics, cause string) int64 {
			return sumValue(t, ms, "lease.losses", kv("lease.backend", "memory"), kv("lease.loss.cause", cause))
		}
		const ttl = 10 * time.Second

		// renew_lost: force-released under its holder, found by Renew;
		// the Release that follows (as lease.Run does) counts nothing more.
		a := must(w.Acquire(ctx, "renew-lost", "me", ttl))(t)
		must(fr.ForceRelease(ctx, "renew-lost"))(t)
		_, err := w.Renew(ctx, a, ttl)
		wantErr(t, err, lease.ErrLost)
		wantErr(t, w.Release(ctx, a), lease.ErrLost)

		// release_lost: force-released, found by Release.
		b := must(w.Acquire(ctx, "release-lost", "me", ttl))(t)
		must(fr.ForceRelease(ctx, "release-lost"))(t)
		wantErr(t, w.Release(ctx, b), lease.ErrLost)

		ms := r.collect(t)
		if n := losses(ms, "renew_lost"); n != 1 {
			t.Errorf("losses{renew_lost} = %d, want 1", n)
		}
		if n := losses(ms, "release_lost"); n != 1 {
			t.Errorf("losses{release_lost} = %d, want 1", n)
		}

		// deadline: a Release that begins after the Deadline, even one
		// the store still accepts (the Deadline ends a drift margin
		// before the store's expiry).
		c := must(w.Acquire(ctx, "late-release", "me", ttl))(t)
		time.Sleep(time.Until(c.Deadline))
		if err := w.Release(ctx, c); err != nil {
			t.Fatalf("Release just after the Deadline, before the store's expiry: %v", err)
		}
		// deadline: a Renew that begins after it, which the store refuses.
		d := must(w.Acquire(ctx, "late-renew", "me", ttl))(t)
		time.Sleep(ttl)
		_, err = w.Renew(ctx, d, ttl)
		wantErr(t, err, lease.ErrLost)
		// deadline: nobody calls; a collection finds the Deadline past,
		// and a later Release counts nothing more.
		e := must(w.Acquire(ctx, "left", "me", ttl))(t)
		if n := sumValue(t, r.collect(t), "lease.held"); n != 1 {
			t.Errorf("lease.held = %d before e's Deadline, want 1", n)
		}
		time.Sleep(ttl)
		ms = r.collect(t)
		if n := sumValue(t, ms, "lease.held"); n != 0 {
			t.Errorf("lease.held = %d after e's Deadline, want 0", n)
		}
		wantErr(t, w.Release(ctx, e), lease.ErrLost)

		ms = r.collect(t)
		if n := losses(ms, "deadline"); n != 3 {
			t.Errorf("losses{deadline} = %d, want 3 (late release, late renew, left to expire)", n)
		}
		if n := losses(ms, "renew_lost") + losses(ms, "release_lost"); n != 2 {
			t.Errorf("losses{renew_lost}+{release_lost} = %d, want still 2", n)
		}
		if n := histCount(t, ms, "lease.hold.duration", kv("lease.outcome", "lost")); n != 5 {
			t.Errorf("lease.hold.duration{lost} has %d measurements, want 5", n)
		}
		// A tenure lost by deadline was held until its Deadline.
		if got, want := histSum(t, ms, "lease.hold.duration", kv("lease.outcome", "lost")), 3*(ttl-lease.DriftMargin(ttl)).Seconds(); got != want {
			t.Errorf("lease.hold.duration{lost} sums to %vs, want %vs (three tenures to their Deadline, two lost at once)", got, want)
		}
		if n := histCount(t, ms, "lease.renewal.slack"); n != 0 {
			t.Errorf("lease.renewal.slack has %d measurements, want 0 (no renewal succeeded)", n)
		}

		// Slack: a renewal a third of the way into the tenure lands with
		// the rest of it to spare.
		f := must(w.Acquire(ctx, "renewed", "me", ttl))(t)
		time.Sleep(ttl / 3)
		f = must(w.Renew(ctx, f, ttl))(t)
		ms = r.collect(t)
		if n := histCount(t, ms, "lease.renewal.slack", kv("lease.backend", "memory")); n != 1 {
			t.Fatalf("lease.renewal.slack has %d measurements, want 1", n)
		}
		if got, want := histSum(t, ms, "lease.renewal.slack"), (ttl - lease.DriftMargin(ttl) - ttl/3).Seconds(); got != want {
			t.Errorf("lease.renewal.slack = %vs, want %vs", got, want)
		}
		// A renewal that lands after the Deadline (the store still had
		// it) is a deadline loss, and the tenure is no longer followed.
		time.Sleep(time.Until(f.Deadline))
		f = must(w.Renew(ctx, f, ttl))(t)
		ms = r.collect(t)
		if n := losses(ms, "deadline"); n != 4 {
			t.Errorf("losses{deadline} = %d after a late renewal, want 4", n)
		}
		if n := sumValue(t, ms, "lease.held"); n != 0 {
			t.Errorf("lease.held = %d after a late renewal, want 0", n)
		}
		if err := w.Release(ctx, f); err != nil {
			t.Fatal(err)
		}
		if n := histCount(t, r.collect(t), "lease.hold.duration", kv("lease.outcome", "released")); n != 0 {
			t.Errorf("lease.hold.duration{released} has %d measurements, want 0 (f had ended at its late renewal)", n)
		}
	})
}

// A Release that fails ends the tenure for the wrapper without a loss.
func TestReleaseFailure(t *testing.T) {
	r := newRig(t)
	store := memory.New()
	w := r.wrap(t, store)
	a := must(w.Acquire(t.Context(), "job", "me", time.Minute))(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := w.Release(ctx, a); !errors.Is(err, context.Canceled) {
		t.Fatalf("Release with a canceled context: %v", err)
	}
	ms := r.collect(t)
	if n := histCount(t, ms, "lease.hold.duration", kv("lease.outcome", "error")); n != 1 {
		t.Errorf("lease.hold.duration{error} has %d measurements, want 1", n)
	}
	if n := sumValue(t, ms, "lease.losses"); n != 0 {
		t.Errorf("lease.losses = %d, want 0", n)
	}
	if n := sumValue(t, ms, "lease.held"); n != 0 {
		t.Errorf("lease.held = %d, want 0", n)
	}
}
