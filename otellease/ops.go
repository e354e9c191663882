package otellease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func newCore(l lease.Locker, cfg config) (*core, error) {
	meter := cfg.mp.Meter(ScopeName)
	in, err := newInstruments(meter, cfg.backend)
	if err != nil {
		return nil, err
	}
	c := &core{l: l, tracer: cfg.tp.Tracer(ScopeName), inst: in, hashNames: cfg.hashNames}
	c.registered, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		o.ObserveInt64(c.inst.held, c.observe(ctx), c.inst.heldOpts...)
		return nil
	}, in.held)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// start begins the span of a call.
func (c *core) start(ctx context.Context, o op) (context.Context, trace.Span) {
	return c.tracer.Start(ctx, spanNames[o], c.inst.spanStart[o]...)
}

// quiet reports whether nothing would record anything of this call: the
// span does not record and every instrument is disabled (no-op providers,
// or global ones before an SDK is installed). The call then goes straight
// through, without reading the clock.
func (c *core) quiet(ctx context.Context, span trace.Span) bool {
	return !span.IsRecording() && !c.inst.duration.Enabled(ctx) && !c.inst.slack.Enabled(ctx) && !c.tracking(ctx)
}

// maxSpanAttrs is the most attributes a call gives its span: operation,
// backend and outcome, and five of the call's (a Renew's, a busy
// Acquire's) or, for a failure, four and error.type.
const maxSpanAttrs = 8

// spanBuf is where a call gathers its span's attributes, to set them in
// one SetAttributes call when it ends. It is not recycled: a
// TracerProvider other than the SDK's may keep the slice it is given.
type spanBuf struct{ kv []attribute.KeyValue }

func (b *spanBuf) add(kv ...attribute.KeyValue) { b.kv = append(b.kv, kv...) }

// spanAttrs returns a buffer for the span's attributes, or nil when the
// span does not record, so that callers can skip making them.
func spanAttrs(span trace.Span) *spanBuf {
	if !span.IsRecording() {
		return nil
	}
	return &spanBuf{kv: make([]attribute.KeyValue, 0, maxSpanAttrs)}
}

// finish records a call's duration and ends its span with the attributes
// in b (see spanAttrs), the outcome and, for a failure, the status.
func (c *core) finish(ctx context.Context, span trace.Span, o op, out outcome, err error, took time.Duration, b *spanBuf) {
	c.inst.duration.Record(ctx, took.Seconds(), c.inst.durationOpts[o][out]...)
	if b != nil {
		b.add(c.inst.spanOp[o]...)
		b.add(c.inst.spanEnd[out]...)
		span.SetAttributes(b.kv...)
		if out.failed() {
			desc := ""
			if !c.hashNames && err != nil {
				desc = err.Error()
			}
			span.SetStatus(codes.Error, desc)
		}
	}
	span.End()
}

// nameAttr is the span attribute for a lease name.
func (c *core) nameAttr(name string) attribute.KeyValue {
	if c.hashNames {
		return keyNameSHA256.String(hashName(name))
	}
	return keyName.String(name)
}

// hashName is how lease.WithHashedNames hashes names for Run's logs.
func hashName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:8])
}

func tokenAttr(t uint64) attribute.KeyValue {
	if t > math.MaxInt64 {
		return keyToken.String(strconv.FormatUint(t, 10))
	}
	return keyToken.Int64(int64(t))
}

func seconds(k attribute.Key, d time.Duration) attribute.KeyValue { return k.Float64(d.Seconds()) }

// Acquire implements lease.Locker. A waiting caller's Acquire (lease.Run
// with WithWait or WithFairWait) carries its place in the line in ctx,
// which the wrapped Locker's Acquire gets: each attempt is recorded here.
func (c *core) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	ctx, span := c.start(ctx, opAcquire)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.Acquire(ctx, name, owner, ttl)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	l, err := c.l.Acquire(ctx, name, owner, ttl)
	end := time.Now()
	out := classify(err, outAcquired)
	if err == nil {
		c.settle(ctx, tenureKey{l.Name, l.Token}, evGranted, l.Deadline, start, end, 0)
	}
	if attrs != nil {
		attrs.add(c.nameAttr(name), keyOwner.String(owner), seconds(keyTTL, ttl))
		var he *lease.HeldError
		switch {
		case err == nil:
			attrs.add(tokenAttr(l.Token))
		case out == outHeld && errors.As(err, &he):
			// No Owner: a fair wait's answer that another waiter is
			// first in line for a free name.
			if he.Owner != "" {
				attrs.add(keyHolder.String(he.Owner))
			}
			attrs.add(seconds(keyRemaining, he.Remaining))
		}
	}
	c.finish(ctx, span, opAcquire, out, err, end.Sub(start), attrs)
	return l, err
}

// Renew implements lease.Locker.
func (c *core) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	ctx, span := c.start(ctx, opRenew)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.Renew(ctx, l, ttl)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	got, err := c.l.Renew(ctx, l, ttl)
	end := time.Now()
	out := classify(err, outRenewed)
	slack := c.renewed(ctx, l, got, out, start, end)
	if attrs != nil {
		attrs.add(c.nameAttr(l.Name), keyOwner.String(l.Owner), tokenAttr(l.Token), seconds(keyTTL, ttl))
		if out == outRenewed {
			attrs.add(seconds(keySlack, slack))
		}
	}
	c.finish(ctx, span, opRenew, out, err, end.Sub(start), attrs)
	return got, err
}

// renewed records what a renewal of l (one Renew, or one item of a
// RenewBatch) found, got and the outcome, and returns the slack of a
// successful one: how long before l's Deadline the answer came.
func (c *core) renewed(ctx context.Context, l, got lease.Lease, out outcome, start, end time.Time) (slack time.Duration) {
	k := tenureKey{l.Name, l.Token}
	switch out {
	case outRenewed:
		slack = l.Deadline.Sub(end)
		if slack > 0 {
			c.inst.slack.Record(ctx, slack.Seconds(), c.inst.backendOpts...)
		}
		c.settle(ctx, k, evRenewed, got.Deadline, start, end, 0)
	case outLost:
		c.settle(ctx, k, evLost, time.Time{}, start, end, causeRenewLost)
	default:
		c.settle(ctx, k, evRenewFailed, time.Time{}, start, end, 0)
	}
	return slack
}

// Release implements lease.Locker.
func (c *core) Release(ctx context.Context, l lease.Lease) error {
	ctx, span := c.start(ctx, opRelease)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.Release(ctx, l)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	err := c.l.Release(ctx, l)
	end := time.Now()
	out := classify(err, outReleased)
	k := tenureKey{l.Name, l.Token}
	switch out {
	case outReleased:
		c.settle(ctx, k, evReleased, time.Time{}, start, end, 0)
	case outLost:
		c.settle(ctx, k, evLost, time.Time{}, start, end, causeReleaseLost)
	default:
		c.settle(ctx, k, evReleaseFailed, time.Time{}, start, end, 0)
	}
	if attrs != nil {
		attrs.add(c.nameAttr(l.Name), keyOwner.String(l.Owner), tokenAttr(l.Token))
	}
	c.finish(ctx, span, opRelease, out, err, end.Sub(start), attrs)
	return err
}

// Inspect implements lease.Locker.
func (c *core) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	ctx, span := c.start(ctx, opInspect)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.Inspect(ctx, name)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	l, err := c.l.Inspect(ctx, name)
	took := time.Since(start)
	if attrs != nil {
		attrs.add(c.nameAttr(name))
		if err == nil {
			attrs.add(keyOwner.String(l.Owner), tokenAttr(l.Token))
		}
	}
	c.finish(ctx, span, opInspect, classify(err, outHeld), err, took, attrs)
	return l, err
}

// list implements lease.Lister for the wrappers whose Locker is one.
func (c *core) list(ctx context.Context, prefix string) ([]lease.Lease, error) {
	ctx, span := c.start(ctx, opList)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.(lease.Lister).List(ctx, prefix)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	ls, err := c.l.(lease.Lister).List(ctx, prefix)
	took := time.Since(start)
	if attrs != nil {
		if c.hashNames {
			attrs.add(keyPrefixSHA.String(hashName(prefix)))
		} else {
			attrs.add(keyPrefix.String(prefix))
		}
		if err == nil {
			attrs.add(keyListCount.Int(len(ls)))
		}
	}
	c.finish(ctx, span, opList, classify(err, outListed), err, took, attrs)
	return ls, err
}

// forceRelease implements lease.ForceReleaser for the wrappers whose
// Locker is one. The tenure it ends, if this process holds it, is found
// lost by its holder's next Renew or Release, which counts the loss.
func (c *core) forceRelease(ctx context.Context, name string) (lease.Lease, error) {
	ctx, span := c.start(ctx, opForceRelease)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.(lease.ForceReleaser).ForceRelease(ctx, name)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	l, err := c.l.(lease.ForceReleaser).ForceRelease(ctx, name)
	took := time.Since(start)
	if attrs != nil {
		attrs.add(c.nameAttr(name))
		if err == nil {
			attrs.add(keyOwner.String(l.Owner), tokenAttr(l.Token))
		}
	}
	c.finish(ctx, span, opForceRelease, classify(err, outReleased), err, took, attrs)
	return l, err
}

// batcher is a Locker that renews many leases in one call, as
// driver.Locker.RenewBatch does and lease.Run uses.
type batcher interface {
	RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error)
}

// renewBatch implements RenewBatch for the wrappers whose Locker has it:
// one span and one duration for the call, and each result counted as a
// Renew's would be.
func (c *core) renewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	ctx, span := c.start(ctx, opRenewBatch)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.(batcher).RenewBatch(ctx, leases, ttls)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	out, errs := c.l.(batcher).RenewBatch(ctx, leases, ttls)
	end := time.Now()
	res := outRenewed
	var renewed, lost, failed int
	var firstErr error
	for i := range min(len(leases), len(out), len(errs)) {
		o := classify(errs[i], outRenewed)
		switch {
		case o == outRenewed:
			renewed++
		case o == outLost:
			lost++
		default:
			failed++
			if firstErr == nil {
				firstErr = errs[i]
			}
		}
		res = worse(res, o)
		c.renewed(ctx, leases[i], out[i], o, start, end)
	}
	if len(out) != len(leases) || len(errs) != len(leases) {
		// The Locker broke RenewBatch's contract; lease.Run reports it.
		res = outError
		firstErr = fmt.Errorf("RenewBatch returned %d leases and %d errors for %d requests", len(out), len(errs), len(leases))
	}
	if attrs != nil {
		attrs.add(keyBatchSize.Int(len(leases)), keyBatchOK.Int(renewed), keyBatchLost.Int(lost), keyBatchFail.Int(failed))
	}
	c.finish(ctx, span, opRenewBatch, res, firstErr, end.Sub(start), attrs)
	return out, errs
}

// watch implements driver.Watcher for the wrappers whose Locker is one. The
// span covers setting the watch up, not its life.
func (c *core) watch(ctx context.Context, name string) (driver.Watch, error) {
	sctx, span := c.start(ctx, opWatch)
	if c.quiet(ctx, span) {
		defer span.End()
		return c.l.(driver.Watcher).Watch(ctx, name)
	}
	attrs := spanAttrs(span)
	start := time.Now()
	// The watch lives on ctx, not on the span's context: a span that
	// ended long ago must not be the parent of whatever the watch does.
	w, err := c.l.(driver.Watcher).Watch(ctx, name)
	took := time.Since(start)
	if attrs != nil {
		attrs.add(c.nameAttr(name))
	}
	c.finish(sctx, span, opWatch, classify(err, outWatching), err, took, attrs)
	return w, err
}
