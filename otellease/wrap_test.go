package otellease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/otellease"
)

// The optional methods of the fakes (fakes_test.go, one for each
// combination of the optional interfaces) say that they were reached.
var (
	errListReached  = errors.New("fake List reached")
	errForceReached = errors.New("fake ForceRelease reached")
	errBatchReached = errors.New("fake RenewBatch reached")
	errWatchReached = errors.New("fake Watch reached")
)

type withList struct{}
type withForce struct{}
type withBatch struct{}
type withWatch struct{}

func (withList) List(context.Context, string) ([]lease.Lease, error) { return nil, errListReached }
func (withForce) ForceRelease(context.Context, string) (lease.Lease, error) {
	return lease.Lease{}, errForceReached
}
func (withBatch) RenewBatch(_ context.Context, leases []lease.Lease, _ []time.Duration) ([]lease.Lease, []error) {
	errs := make([]error, len(leases))
	for i := range errs {
		errs[i] = errBatchReached
	}
	return make([]lease.Lease, len(leases)), errs
}
func (withWatch) Watch(context.Context, string) (driver.Watch, error) { return nil, errWatchReached }

// lockerOnly is a lease.Locker and nothing more: an interface field
// promotes only the interface's methods (failing's Watch stays hidden).
type lockerOnly struct{ lease.Locker }

var only = lockerOnly{failing{errors.New("fake store down")}}

func interfaces(l lease.Locker) (bits int) {
	if _, ok := l.(lease.Lister); ok {
		bits |= 1
	}
	if _, ok := l.(lease.ForceReleaser); ok {
		bits |= 2
	}
	if _, ok := l.(batchtest.Batcher); ok {
		bits |= 4
	}
	if _, ok := l.(driver.Watcher); ok {
		bits |= 8
	}
	return bits
}

// canOf is what lease.Can says l can do, in the bits of interfaces.
func canOf(l lease.Locker) (bits int) {
	for i, can := range []bool{lease.Can[lease.Lister](l), lease.Can[lease.ForceReleaser](l), lease.Can[batchtest.Batcher](l), lease.Can[driver.Watcher](l)} {
		if can {
			bits |= 1 << i
		}
	}
	return bits
}

// cannotWatch has Watch but, as a Redis Ring's Locker or a SQLite one,
// says through Can that it cannot watch.
type cannotWatch struct{ fakeW }

func (cannotWatch) Can(p any) bool {
	_, watch := p.(*driver.Watcher)
	return !watch
}

// The wrapper is one type whatever it wraps: lease.Can on it answers as
// on the wrapped Locker; each optional method reaches the wrapped
// Locker's, or fails with an error matching errors.ErrUnsupported that
// names the method when the wrapped Locker has not got it.
func TestWrapperTellsWhatTheWrappedLockerCan(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	reaches := func(t *testing.T, inner lease.Locker, method string, has bool, err, reached error) {
		t.Helper()
		switch {
		case has && !errors.Is(err, reached):
			t.Errorf("Wrap(%T).%s: %v, want the wrapped Locker's %s", inner, method, err, method)
		case !has && (!errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), method)):
			t.Errorf("Wrap(%T).%s: %v, want an error matching errors.ErrUnsupported that names %s", inner, method, err, method)
		}
	}
	for bits, inner := range fakes {
		if got := interfaces(inner); got != bits {
			t.Fatalf("fake %d (%T) has interfaces %04b, want %04b", bits, inner, got, bits)
		}
		if got := canOf(inner); got != bits {
			t.Fatalf("lease.Can on fake %d (%T) says %04b, want %04b", bits, inner, got, bits)
		}
		w := r.wrap(t, inner)
		if got, want := canOf(w), bits; got != want {
			t.Errorf("lease.Can on Wrap(%T) says %04b, want %04b", inner, got, want)
		}
		if u := w.(interface{ Unwrap() lease.Locker }).Unwrap(); u != inner {
			t.Errorf("Wrap(%T).Unwrap() = %T, want the wrapped Locker", inner, u)
		}
		_, err := w.(lease.Lister).List(ctx, "")
		reaches(t, inner, "List", bits&1 != 0, err, errListReached)
		_, err = w.(lease.ForceReleaser).ForceRelease(ctx, "x")
		reaches(t, inner, "ForceRelease", bits&2 != 0, err, errForceReached)
		_, err = w.(driver.Watcher).Watch(ctx, "x")
		reaches(t, inner, "Watch", bits&8 != 0, err, errWatchReached)
		res := batchtest.RenewBatch(ctx, w.(batchtest.Batcher), make([]batchtest.Req, 2))
		if len(res) != 2 {
			t.Fatalf("Wrap(%T).RenewBatch of 2 gave %d results", inner, len(res))
		}
		reaches(t, inner, "RenewBatch", bits&4 != 0, res[1].Err, errBatchReached)
	}
	// A Locker that has Watch but cannot watch: the wrapper says so too.
	if lease.Can[driver.Watcher](r.wrap(t, cannotWatch{fakeW{lockerOnly: only}})) {
		t.Error("lease.Can[driver.Watcher] is true on the wrapper of a Locker that says it cannot watch")
	}
	// The backends' Lockers can do all four.
	if got := canOf(r.wrap(t, memory.New())); got != 15 {
		t.Errorf("lease.Can on a wrapped memory Locker says %04b, want all four", got)
	}
}

// Bad arguments are errors matching lease.ErrInvalid that name the
// problem; nothing panics.
func TestWrapRefusesBadArguments(t *testing.T) {
	for _, c := range []struct {
		name string
		l    lease.Locker
		opts []otellease.Option
		want string
	}{
		{"nil Locker", nil, nil, "nil Locker"},
		{"nil Option", memory.New(), []otellease.Option{nil}, "nil Option"},
		{"nil meter provider", memory.New(), []otellease.Option{otellease.WithMeterProvider(nil)}, "WithMeterProvider(nil)"},
		{"nil tracer provider", memory.New(), []otellease.Option{otellease.WithTracerProvider(nil)}, "WithTracerProvider(nil)"},
		{"empty backend", memory.New(), []otellease.Option{otellease.WithBackend("")}, `WithBackend("")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := otellease.Wrap(c.l, c.opts...)
			if !errors.Is(err, lease.ErrInvalid) || w != nil {
				t.Fatalf("Wrap: %v, %v; want nil and an error matching ErrInvalid", w, err)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.Contains(msg, "otellease: Wrap: ") {
				t.Errorf("error %q does not start with otellease: Wrap: or name %s", msg, c.want)
			}
		})
	}
}

// The backend is the wrapped Locker's package, looking through wrappers,
// unless WithBackend names it.
func TestBackendName(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	backendOf := func(w lease.Locker) string {
		r.spans.Reset()
		_, _ = w.Inspect(ctx, "x")
		return attr(r.span(t, "lease.inspect"), "lease.backend")
	}
	// An inner wrapper that records elsewhere.
	inner := newRig(t).wrap(t, memory.New())
	for _, c := range []struct {
		w    lease.Locker
		want string
	}{
		{r.wrap(t, memory.New()), "memory"},
		{r.wrap(t, memory.New(), otellease.WithBackend("mem-test")), "mem-test"},
		{r.wrap(t, inner), "memory"},
		{r.wrap(t, failing{errors.New("down")}), "otellease_test"},
	} {
		if got := backendOf(c.w); got != c.want {
			t.Errorf("lease.backend = %q, want %q", got, c.want)
		}
	}
}

// WithHashedNames puts the name's hash on spans instead of the name, as
// lease.WithHashedNames does in Run's logs, and keeps the error text,
// which quotes the name, out of the span's status.
func TestHashedNames(t *testing.T) {
	r := newRig(t)
	w := r.wrap(t, memory.New(), otellease.WithHashedNames())
	ctx := t.Context()
	const secret = "tenant/4711/invoice-run"
	must(w.Acquire(ctx, secret, "me", time.Minute))(t)
	_, _ = w.Acquire(ctx, secret, "me", 0) // invalid ttl: a failure
	_, _ = w.(lease.Lister).List(ctx, "tenant/")
	for _, s := range r.spans.GetSpans() {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "tenant/") {
				t.Errorf("span %s shows the name in %s=%q", s.Name, kv.Key, kv.Value.String())
			}
		}
		if strings.Contains(s.Status.Description, "tenant/") {
			t.Errorf("span %s shows the name in its status %q", s.Name, s.Status.Description)
		}
	}
	spans := r.spans.GetSpans()
	if got, want := attr(spans[0], "lease.name_sha256"), otellease.HashName(secret); got != want || len(want) != 16 {
		t.Errorf("lease.name_sha256 = %q, want %q (16 hex digits)", got, want)
	}
	if got, want := attr(spans[2], "lease.prefix_sha256"), otellease.HashName("tenant/"); got != want {
		t.Errorf("lease.prefix_sha256 = %q, want %q", got, want)
	}
}

// Close closes the wrapped Locker and stops observing lease.held for it.
func TestCloseStopsObserving(t *testing.T) {
	r := newRig(t)
	a := r.wrap(t, memory.New(), otellease.WithBackend("a"))
	b := r.wrap(t, memory.New(), otellease.WithBackend("b"))
	must(a.Acquire(t.Context(), "job", "me", time.Minute))(t)
	must(b.Acquire(t.Context(), "job", "me", time.Minute))(t)
	held := func() map[string]int64 {
		out := map[string]int64{}
		for _, dp := range r.collect(t)["lease.held"].Data.(metricdata.Sum[int64]).DataPoints {
			v, _ := dp.Attributes.Value("lease.backend")
			out[v.AsString()] = dp.Value
		}
		return out
	}
	if got := held(); got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("lease.held = %v, want a:1 b:1", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Inspect(t.Context(), "job"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Inspect after Close: %v, want ErrClosed (Close closes the wrapped Locker)", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := held(); len(got) != 1 || got["b"] != 1 {
		t.Fatalf("lease.held = %v after closing a, want only b:1", got)
	}
}
