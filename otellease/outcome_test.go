package otellease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/otellease"
)

// failing is a Locker whose store is down: every call returns err. It is
// a Waiter whose Watch is unsupported.
type failing struct{ err error }

func (f failing) Acquire(context.Context, string, string, time.Duration) (lease.Lease, error) {
	return lease.Lease{}, f.err
}
func (f failing) Renew(context.Context, lease.Lease, time.Duration) (lease.Lease, error) {
	return lease.Lease{}, f.err
}
func (f failing) Release(context.Context, lease.Lease) error           { return f.err }
func (f failing) Inspect(context.Context, string) (lease.Lease, error) { return lease.Lease{}, f.err }
func (f failing) Close() error                                         { return nil }
func (f failing) Watch(context.Context, string) (driver.Watch, error) {
	return nil, fmt.Errorf("failing: watch: %w", errors.ErrUnsupported)
}

// step is one call through a wrapper and what it must record: one
// measurement of lease.operation.duration for op and outcome (with
// error.type when failed), and one span lease.<op> with attributes span.
type step struct {
	name    string
	call    func(t *testing.T)
	op      string
	outcome string
	errType string // error.type, for the failures
	span    map[string]string
}

func runSteps(t *testing.T, r *rig, backend string, steps []step) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			want := []attribute.KeyValue{kv("lease.backend", backend), kv("lease.operation", s.op), kv("lease.outcome", s.outcome)}
			if s.errType != "" {
				want = append(want, kv("error.type", s.errType))
			}
			before := histCount(t, r.collect(t), "lease.operation.duration", want...)
			r.spans.Reset()
			s.call(t)
			if got := histCount(t, r.collect(t), "lease.operation.duration", want...) - before; got != 1 {
				t.Errorf("lease.operation.duration%v: %d new measurements, want 1", want, got)
			}
			spanWant := map[string]string{"lease.backend": backend, "lease.operation": s.op, "lease.outcome": s.outcome}
			if s.errType != "" {
				spanWant["error.type"] = s.errType
			}
			for k, v := range s.span {
				spanWant[k] = v
			}
			checkSpan(t, r.span(t, "lease."+s.op), spanWant, s.errType != "")
		})
	}
}

// must returns v, failing the test given to its result when err is set:
// must(l.Acquire(...))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// wantErr fails t unless err matches target.
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got %v, want an error matching %v", err, target)
	}
}

// Every operation's outcomes, as metrics and spans, on a memory store
// (whose tokens count from 1 across names: job/a gets 1, job/b 2).
func TestOutcomesOnMemory(t *testing.T) {
	r := newRig(t)
	store := memory.New()
	w := r.wrap(t, store)
	ctx := t.Context()
	var a, b, lost lease.Lease
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()

	runSteps(t, r, "memory", []step{
		{name: "acquire of a free name", op: "acquire", outcome: "acquired",
			call: func(t *testing.T) { a = must(w.Acquire(ctx, "job/a", "owner-a", time.Minute))(t) },
			span: map[string]string{"lease.name": "job/a", "lease.owner": "owner-a", "lease.token": "*", "lease.ttl": "60"}},
		{name: "re-entrant acquire", op: "acquire", outcome: "acquired",
			call: func(t *testing.T) { a = must(w.Acquire(ctx, "job/a", "owner-a", time.Minute))(t) },
			span: map[string]string{"lease.token": "*"}},
		{name: "acquire of a busy name is not a failure", op: "acquire", outcome: "held",
			call: func(t *testing.T) {
				_, err := w.Acquire(ctx, "job/a", "owner-b", time.Minute)
				wantErr(t, err, lease.ErrHeld)
			},
			span: map[string]string{"lease.owner": "owner-b", "lease.holder": "owner-a", "lease.remaining": "*"}},
		{name: "acquire with a bad ttl", op: "acquire", outcome: "invalid", errType: "invalid",
			call: func(t *testing.T) {
				_, err := w.Acquire(ctx, "job/a", "owner-b", 0)
				wantErr(t, err, lease.ErrInvalid)
			}},
		{name: "acquire with a canceled context", op: "acquire", outcome: "error", errType: "canceled",
			call: func(t *testing.T) {
				_, err := w.Acquire(canceled, "job/c", "owner-c", time.Minute)
				wantErr(t, err, context.Canceled)
			}},
		{name: "acquire past the context's deadline", op: "acquire", outcome: "error", errType: "timeout",
			call: func(t *testing.T) {
				_, err := w.Acquire(expired, "job/c", "owner-c", time.Minute)
				wantErr(t, err, context.DeadlineExceeded)
			}},
		{name: "renew", op: "renew", outcome: "renewed",
			call: func(t *testing.T) { a = must(w.Renew(ctx, a, time.Minute))(t) },
			span: map[string]string{"lease.name": "job/a", "lease.owner": "owner-a", "lease.token": "1", "lease.slack": "*"}},
		{name: "renew of a forged tenure", op: "renew", outcome: "lost",
			call: func(t *testing.T) {
				forged := a
				forged.Token++
				_, err := w.Renew(ctx, forged, time.Minute)
				wantErr(t, err, lease.ErrLost)
			}},
		{name: "renew of a zero lease", op: "renew", outcome: "invalid", errType: "invalid",
			call: func(t *testing.T) {
				_, err := w.Renew(ctx, lease.Lease{}, time.Minute)
				wantErr(t, err, lease.ErrInvalid)
			}},
		{name: "inspect of a held name", op: "inspect", outcome: "held",
			call: func(t *testing.T) { must(w.Inspect(ctx, "job/a"))(t) },
			span: map[string]string{"lease.name": "job/a", "lease.owner": "owner-a", "lease.token": "1"}},
		{name: "inspect of a free name", op: "inspect", outcome: "not_held",
			call: func(t *testing.T) {
				_, err := w.Inspect(ctx, "job/free")
				wantErr(t, err, lease.ErrNotHeld)
			},
			span: map[string]string{"lease.name": "job/free"}},
		{name: "list", op: "list", outcome: "listed",
			call: func(t *testing.T) {
				b = must(store.Acquire(ctx, "job/b", "owner-b", time.Minute))(t)
				if ls := must(w.(lease.Lister).List(ctx, "job/"))(t); len(ls) != 2 {
					t.Fatalf("List: %v, want 2 tenures", ls)
				}
			},
			span: map[string]string{"lease.prefix": "job/", "lease.list.count": "2"}},
		{name: "force release of a free name", op: "force_release", outcome: "not_held",
			call: func(t *testing.T) {
				_, err := w.(lease.ForceReleaser).ForceRelease(ctx, "job/free")
				wantErr(t, err, lease.ErrNotHeld)
			}},
		{name: "force release of a held name", op: "force_release", outcome: "released",
			call: func(t *testing.T) {
				lost = b
				must(w.(lease.ForceReleaser).ForceRelease(ctx, "job/b"))(t)
			},
			span: map[string]string{"lease.name": "job/b", "lease.owner": "owner-b", "lease.token": "2"}},
		{name: "release of a force-released tenure", op: "release", outcome: "lost",
			call: func(t *testing.T) { wantErr(t, w.Release(ctx, lost), lease.ErrLost) },
			span: map[string]string{"lease.name": "job/b", "lease.owner": "owner-b", "lease.token": "2"}},
		{name: "release of a zero lease", op: "release", outcome: "invalid", errType: "invalid",
			call: func(t *testing.T) { wantErr(t, w.Release(ctx, lease.Lease{}), lease.ErrInvalid) }},
		{name: "watch", op: "watch", outcome: "watching",
			call: func(t *testing.T) { must(w.(driver.Watcher).Watch(ctx, "job/a"))(t).Stop() },
			span: map[string]string{"lease.name": "job/a"}},
		{name: "a batch with a lost tenure", op: "renew_batch", outcome: "lost",
			call: func(t *testing.T) {
				res := batchtest.RenewBatch(ctx, w.(batchtest.Batcher), []batchtest.Req{{Lease: a, TTL: time.Minute}, {Lease: lost, TTL: time.Minute}})
				if res[0].Err != nil || !errors.Is(res[1].Err, lease.ErrLost) {
					t.Fatalf("RenewBatch: %v", res)
				}
				a = res[0].Lease
			},
			span: map[string]string{"lease.batch.size": "2", "lease.batch.renewed": "1", "lease.batch.lost": "1", "lease.batch.failed": "0"}},
		{name: "a batch with a malformed request", op: "renew_batch", outcome: "invalid", errType: "invalid",
			call: func(t *testing.T) {
				res := batchtest.RenewBatch(ctx, w.(batchtest.Batcher), []batchtest.Req{{Lease: a, TTL: time.Minute}, {Lease: lost, TTL: time.Minute}, {TTL: time.Minute}})
				if res[0].Err != nil || !errors.Is(res[2].Err, lease.ErrInvalid) {
					t.Fatalf("RenewBatch: %v", res)
				}
				a = res[0].Lease
			},
			span: map[string]string{"lease.batch.size": "3", "lease.batch.renewed": "1", "lease.batch.lost": "1", "lease.batch.failed": "1"}},
		{name: "a batch that all renews", op: "renew_batch", outcome: "renewed",
			call: func(t *testing.T) {
				res := batchtest.RenewBatch(ctx, w.(batchtest.Batcher), []batchtest.Req{{Lease: a, TTL: time.Minute}})
				a = must(res[0].Lease, res[0].Err)(t)
			}},
		{name: "release", op: "release", outcome: "released",
			call: func(t *testing.T) {
				if err := w.Release(ctx, a); err != nil {
					t.Fatal(err)
				}
			},
			span: map[string]string{"lease.name": "job/a", "lease.owner": "owner-a", "lease.token": "1"}},
	})

	closed := r.wrap(t, store.Share())
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	runSteps(t, r, "memory", []step{
		{name: "acquire on a closed locker", op: "acquire", outcome: "closed", errType: "closed",
			call: func(t *testing.T) {
				_, err := closed.Acquire(ctx, "job/d", "owner-d", time.Minute)
				wantErr(t, err, lease.ErrClosed)
			}},
	})
}

// A store failure is outcome error, error.type _OTHER, with the error's
// text as the span's status; an unsupported Watch is not a failure.
func TestOutcomesOfAFailingStore(t *testing.T) {
	r := newRig(t)
	down := errors.New("dial tcp 10.0.0.1:5432: connection refused")
	w := r.wrap(t, failing{down}, otellease.WithBackend("postgres"))
	ctx := t.Context()
	held := lease.Lease{Name: "job", Owner: "me", Token: 7, Deadline: time.Now().Add(time.Minute)}
	runSteps(t, r, "postgres", []step{
		{name: "acquire", op: "acquire", outcome: "error", errType: "_OTHER",
			call: func(t *testing.T) {
				_, err := w.Acquire(ctx, "job", "me", time.Minute)
				wantErr(t, err, down)
			}},
		{name: "renew", op: "renew", outcome: "error", errType: "_OTHER",
			call: func(t *testing.T) {
				_, err := w.Renew(ctx, held, time.Minute)
				wantErr(t, err, down)
			}},
		{name: "release", op: "release", outcome: "error", errType: "_OTHER",
			call: func(t *testing.T) { wantErr(t, w.Release(ctx, held), down) }},
		{name: "inspect", op: "inspect", outcome: "error", errType: "_OTHER",
			call: func(t *testing.T) {
				_, err := w.Inspect(ctx, "job")
				wantErr(t, err, down)
			}},
		{name: "unsupported watch", op: "watch", outcome: "unsupported",
			call: func(t *testing.T) {
				_, err := w.(driver.Watcher).Watch(ctx, "job")
				wantErr(t, err, errors.ErrUnsupported)
			}},
	})
	r.spans.Reset()
	_, _ = w.Acquire(ctx, "job", "me", time.Minute)
	if s := r.span(t, "lease.acquire"); s.Status.Description != down.Error() {
		t.Errorf("status description %q, want the error's text %q", s.Status.Description, down.Error())
	}
}

// busy is a Locker whose Acquire always finds the name busy, held by
// holder; with no holder, it answers as a fair wait does when another
// waiter is first in line for a free name. It keeps no line of waiters.
type busy struct {
	failing
	holder string
}

func (b busy) Acquire(_ context.Context, name, _ string, _ time.Duration) (lease.Lease, error) {
	return lease.Lease{}, &lease.HeldError{Name: name, Owner: b.holder, Remaining: time.Second}
}

// A busy answer without a holder (another waiter is first in line) is
// outcome held, with the time left but no lease.holder.
func TestBusyWithoutHolder(t *testing.T) {
	r := newRig(t)
	w := r.wrap(t, busy{failing: failing{errors.New("unused")}}, otellease.WithBackend("memory"))
	runSteps(t, r, "memory", []step{
		{name: "acquire behind another waiter", op: "acquire", outcome: "held",
			call: func(t *testing.T) {
				_, err := w.Acquire(t.Context(), "job", "me", time.Minute)
				wantErr(t, err, lease.ErrHeld)
			},
			span: map[string]string{"lease.name": "job", "lease.owner": "me", "lease.remaining": "1"}},
	})
	if s := r.span(t, "lease.acquire"); hasAttr(s, "lease.holder") {
		t.Errorf("span has lease.holder %q, want none", attr(s, "lease.holder"))
	}
}
