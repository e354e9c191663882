package otellease

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"github.com/leasekit/lease"
)

// outcome is what a call found, as lease.outcome (and error.type for the
// failures).
type outcome uint8

const (
	outAcquired outcome = iota
	outHeld
	outRenewed
	outLost
	outReleased
	outNotHeld
	outListed
	outWatching
	outUnsupported
	// The failures, from here on.
	outInvalid
	outClosed
	outTimeout  // "error", error.type "timeout": the call's context's deadline passed
	outCanceled // "error", error.type "canceled": the call's context was canceled
	outError    // "error", error.type "_OTHER": the store failed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"acquired", "held", "renewed", "lost", "released", "not_held", "listed", "watching", "unsupported",
	"invalid", "closed", "error", "error", "error",
}

var errorTypes = [numOutcomes]string{
	outInvalid:  "invalid",
	outClosed:   "closed",
	outTimeout:  "timeout",
	outCanceled: "canceled",
	outError:    "_OTHER",
}

// failed reports whether o is a failure of the call rather than an answer
// from the store.
func (o outcome) failed() bool { return o >= outInvalid }

// attrs is lease.outcome and, for a failure, error.type.
func (o outcome) attrs() []attribute.KeyValue {
	a := []attribute.KeyValue{keyOutcome.String(outcomeNames[o])}
	if o.failed() {
		a = append(a, keyErrorType.String(errorTypes[o]))
	}
	return a
}

// classify names the outcome of a call that returned err, ok for nil.
func classify(err error, ok outcome) outcome {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, lease.ErrHeld):
		return outHeld
	case errors.Is(err, lease.ErrLost):
		return outLost
	case errors.Is(err, lease.ErrNotHeld):
		return outNotHeld
	case errors.Is(err, lease.ErrInvalid):
		return outInvalid
	case errors.Is(err, lease.ErrClosed):
		return outClosed
	case errors.Is(err, errors.ErrUnsupported):
		return outUnsupported
	case errors.Is(err, context.DeadlineExceeded):
		return outTimeout
	case errors.Is(err, context.Canceled):
		return outCanceled
	}
	return outError
}

// worse is the outcome a RenewBatch reports for results a and b: the
// failures first (error, closed, invalid), then lost, then renewed.
func worse(a, b outcome) outcome {
	if batchRank(b) > batchRank(a) {
		return b
	}
	return a
}

func batchRank(o outcome) int {
	switch o {
	case outRenewed:
		return 0
	case outLost:
		return 1
	case outInvalid:
		return 2
	case outClosed:
		return 3
	}
	return 4 // error, timeout, canceled, anything unexpected
}
