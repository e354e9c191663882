package otellease_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/otellease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is an SDK meter provider with a manual reader and an SDK tracer
// provider with an in-memory exporter, for reading back what the wrapper
// recorded.
type rig struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
}

func newRig(t testing.TB) *rig {
	r := &rig{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter()}
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	t.Cleanup(func() {
		_ = r.mp.Shutdown(context.Background())
		_ = r.tp.Shutdown(context.Background())
	})
	return r
}

// wrap wraps l with the rig's providers and closes the wrapper when the
// test ends.
func (r *rig) wrap(t testing.TB, l lease.Locker, opts ...otellease.Option) lease.Locker {
	t.Helper()
	w, err := otellease.Wrap(l, append([]otellease.Option{otellease.WithMeterProvider(r.mp), otellease.WithTracerProvider(r.tp)}, opts...)...)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// collect returns the wrapper's metrics by name.
func (r *rig) collect(t testing.TB) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otellease.ScopeName {
			t.Errorf("metrics from scope %q, want only %q", sm.Scope.Name, otellease.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// histCount is the number of measurements of histogram name whose
// attributes include want.
func histCount(t testing.TB, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) uint64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", name, m.Data)
	}
	var n uint64
	for _, dp := range h.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Count
		}
	}
	return n
}

// histSum is the sum of histogram name's measurements whose attributes
// include want.
func histSum(t testing.TB, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) float64 {
	t.Helper()
	h, _ := ms[name].Data.(metricdata.Histogram[float64])
	var s float64
	for _, dp := range h.DataPoints {
		if matches(dp.Attributes, want) {
			s += dp.Sum
		}
	}
	return s
}

// sumValue is the value of int64 sum name over the data points whose
// attributes include want.
func sumValue(t testing.TB, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, m.Data)
	}
	var v int64
	for _, dp := range s.DataPoints {
		if matches(dp.Attributes, want) {
			v += dp.Value
		}
	}
	return v
}

// span returns the only span named name, failing when there is not
// exactly one.
func (r *rig) span(t testing.TB, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range r.spans.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %s", len(found), name, spanNames(r.spans.GetSpans()))
	}
	return found[0]
}

func spanNames(ss tracetest.SpanStubs) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}

// attr returns span attribute k as a string ("" when absent).
func attr(s tracetest.SpanStub, k string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == k {
			return kv.Value.String()
		}
	}
	return ""
}

func hasAttr(s tracetest.SpanStub, k string) bool {
	return slices.ContainsFunc(s.Attributes, func(kv attribute.KeyValue) bool { return string(kv.Key) == k })
}

// checkSpan checks a span's kind, attributes and status: want maps
// attribute keys to values ("*" for any value), and failed says whether
// its status must be Error.
func checkSpan(t testing.TB, s tracetest.SpanStub, want map[string]string, failed bool) {
	t.Helper()
	if s.SpanKind.String() != "client" {
		t.Errorf("span %s has kind %s, want client", s.Name, s.SpanKind)
	}
	for k, v := range want {
		got := attr(s, k)
		switch {
		case !hasAttr(s, k):
			t.Errorf("span %s has no attribute %s; it has %v", s.Name, k, s.Attributes)
		case v != "*" && got != v:
			t.Errorf("span %s: %s = %q, want %q", s.Name, k, got, v)
		}
	}
	switch {
	case failed && s.Status.Code != codes.Error:
		t.Errorf("span %s has status %v, want Error", s.Name, s.Status)
	case !failed && s.Status.Code != codes.Unset:
		t.Errorf("span %s has status %v, want Unset (an answer from the store is not an error)", s.Name, s.Status)
	}
	if failed != hasAttr(s, "error.type") {
		t.Errorf("span %s: error.type present = %v, want %v", s.Name, hasAttr(s, "error.type"), failed)
	}
}

func kv(k, v string) attribute.KeyValue { return attribute.String(k, v) }
