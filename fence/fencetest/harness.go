package fencetest

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/lease/fence"
)

// Target is a checker and the data it guards, as the suite sees them.
type Target interface {
	// Check is the checker's own check-and-raise (see fence.Checker).
	fence.Checker

	// Write sets the data item key to value, guarded by the fence: the
	// check of (name, token) and the write succeed or fail together. It
	// returns nil when the write was accepted and made; an error matching
	// fence.ErrStale (a *fence.StaleError) when it was refused, having
	// changed nothing; any other error otherwise.
	Write(ctx context.Context, name string, token uint64, key, value string) error

	// Read returns the value of the data item key, and false if it was
	// never written. It sees every write accepted before it was called.
	Read(ctx context.Context, key string) (value string, ok bool, err error)
}

// Harness describes the checker under test to Run.
type Harness struct {
	// New returns a Target on the store under test. Run calls it at least
	// once per subtest; every Target of one Harness must share one store
	// (one fence and one set of data items), and each call should open a
	// new connection or client, so that the suite can tell that the
	// maximum lives in the store and not in the Target. Release what it
	// opens with t.Cleanup.
	New func(t testing.TB) Target

	// Restart, when set, stops and restarts the store (a private instance,
	// never a shared server), so that the suite can check that every
	// maximum survives, exactly, whether a guarded write or Check alone
	// raised it. Targets made before it may stop working.
	Restart func(t testing.TB)

	// Writers and Writes are the shape of the concurrency case: Writes
	// rounds, in each of which Writers goroutines (each with its own
	// Target) are released at once to make one guarded write each. Zero
	// means 8 and 25.
	Writers, Writes int

	// Timeout bounds each subtest. Zero means 60s.
	Timeout time.Duration

	// Prefix is put before every name and data key the suite uses, so runs
	// against a persistent store never meet each other's. Zero means a
	// random prefix per Run.
	Prefix string
}
