package otellease

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// The instruments' names, as the package documentation lists them.
const (
	metricOperationDuration = "lease.operation.duration"
	metricHeld              = "lease.held"
	metricHoldDuration      = "lease.hold.duration"
	metricRenewalSlack      = "lease.renewal.slack"
	metricLosses            = "lease.losses"
)

// The attribute keys.
const (
	keyOperation  = attribute.Key("lease.operation")
	keyBackend    = attribute.Key("lease.backend")
	keyOutcome    = attribute.Key("lease.outcome")
	keyErrorType  = attribute.Key("error.type")
	keyLossCause  = attribute.Key("lease.loss.cause")
	keyName       = attribute.Key("lease.name")
	keyNameSHA256 = attribute.Key("lease.name_sha256")
	keyPrefix     = attribute.Key("lease.prefix")
	keyPrefixSHA  = attribute.Key("lease.prefix_sha256")
	keyOwner      = attribute.Key("lease.owner")
	keyToken      = attribute.Key("lease.token")
	keyTTL        = attribute.Key("lease.ttl")
	keySlack      = attribute.Key("lease.slack")
	keyHolder     = attribute.Key("lease.holder")
	keyRemaining  = attribute.Key("lease.remaining")
	keyListCount  = attribute.Key("lease.list.count")
	keyBatchSize  = attribute.Key("lease.batch.size")
	keyBatchOK    = attribute.Key("lease.batch.renewed")
	keyBatchLost  = attribute.Key("lease.batch.lost")
	keyBatchFail  = attribute.Key("lease.batch.failed")
)

// Bucket boundaries, in seconds, given to the SDK as advice (a View
// overrides them). Store calls take from microseconds (memory) to tens of
// milliseconds (a remote SQL server), and seconds when the store stalls.
var (
	operationBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	holdBuckets      = []float64{0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 86400}
	slackBuckets     = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 300}
)

// op is an operation of a Locker.
type op uint8

const (
	opAcquire op = iota
	opRenew
	opRenewBatch
	opRelease
	opInspect
	opList
	opForceRelease
	opWatch
	numOps
)

var opNames = [numOps]string{"acquire", "renew", "renew_batch", "release", "inspect", "list", "force_release", "watch"}

// spanNames are the span names, "lease." + the operation.
var spanNames = func() (n [numOps]string) {
	for i, s := range opNames {
		n[i] = "lease." + s
	}
	return n
}()

// The ways a tenure the wrapper follows can end, for lease.hold.duration.
type holdEnd uint8

const (
	endReleased holdEnd = iota
	endLost
	endFailed
	numEnds
)

var holdEndNames = [numEnds]string{"released", "lost", "error"}

// The causes of lease.losses.
type cause uint8

const (
	causeRenewLost cause = iota
	causeReleaseLost
	causeDeadline
	numCauses
)

var causeNames = [numCauses]string{"renew_lost", "release_lost", "deadline"}

// instruments holds the wrapper's instruments and, made once in Wrap, the
// attribute sets of every measurement, so that recording allocates
// nothing.
type instruments struct {
	duration metric.Float64Histogram
	held     metric.Int64ObservableUpDownCounter
	hold     metric.Float64Histogram
	slack    metric.Float64Histogram
	losses   metric.Int64Counter

	durationOpts [numOps][numOutcomes][]metric.RecordOption
	holdOpts     [numEnds][]metric.RecordOption
	lossOpts     [numCauses][]metric.AddOption
	backendOpts  []metric.RecordOption
	heldOpts     []metric.ObserveOption

	spanStart [numOps][]trace.SpanStartOption
	spanOp    [numOps][]attribute.KeyValue
	spanEnd   [numOutcomes][]attribute.KeyValue
}

func newInstruments(m metric.Meter, backend string) (instruments, error) {
	var in instruments
	var err error
	if in.duration, err = m.Float64Histogram(metricOperationDuration,
		metric.WithDescription("Duration of lease operations: each call to the Locker, from request to answer."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(operationBuckets...)); err != nil {
		return in, err
	}
	if in.held, err = m.Int64ObservableUpDownCounter(metricHeld,
		metric.WithDescription("Leases this process holds now: acquired through the wrapper, Deadline not passed, not released or lost."),
		metric.WithUnit("{lease}")); err != nil {
		return in, err
	}
	if in.hold, err = m.Float64Histogram(metricHoldDuration,
		metric.WithDescription("How long tenures were held, from Acquire to release or loss."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(holdBuckets...)); err != nil {
		return in, err
	}
	if in.slack, err = m.Float64Histogram(metricRenewalSlack,
		metric.WithDescription("Time left before the Deadline when a renewal succeeded."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(slackBuckets...)); err != nil {
		return in, err
	}
	if in.losses, err = m.Int64Counter(metricLosses,
		metric.WithDescription("Leases lost, by cause: renew_lost, release_lost or deadline."),
		metric.WithUnit("{loss}")); err != nil {
		return in, err
	}

	b := keyBackend.String(backend)
	for o := range numOps {
		opAttr := keyOperation.String(opNames[o])
		for k := range numOutcomes {
			attrs := append([]attribute.KeyValue{b, opAttr}, k.attrs()...)
			in.durationOpts[o][k] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
		}
		// The span's attributes are all set when it ends, in one call:
		// given at the start, they would cost the SDK two more
		// allocations. Samplers see the operation in the span's name.
		in.spanStart[o] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
		in.spanOp[o] = []attribute.KeyValue{opAttr, b}
	}
	for k := range numOutcomes {
		in.spanEnd[k] = k.attrs()
	}
	for e := range numEnds {
		in.holdOpts[e] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(b, keyOutcome.String(holdEndNames[e])))}
	}
	for c := range numCauses {
		in.lossOpts[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(b, keyLossCause.String(causeNames[c])))}
	}
	bset := attribute.NewSet(b)
	in.backendOpts = []metric.RecordOption{metric.WithAttributeSet(bset)}
	in.heldOpts = []metric.ObserveOption{metric.WithAttributeSet(bset)}
	return in, nil
}
