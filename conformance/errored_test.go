package conformance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/driver"
)

// downStore is a store that cannot be reached: every call fails as a
// refused connection would. Behind driver.NewLocker, bad input is still
// refused before any call.
type downStore struct{}

var errDown = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

func (downStore) Acquire(context.Context, string, string, time.Duration) (driver.Tenure, error) {
	return driver.Tenure{}, errDown
}

func (downStore) Renew(context.Context, driver.Tenure, time.Duration) (driver.Tenure, bool, error) {
	return driver.Tenure{}, false, errDown
}
func (downStore) Release(context.Context, driver.Tenure) (bool, error) { return false, errDown }
func (downStore) Inspect(context.Context, string) (driver.Tenure, bool, error) {
	return driver.Tenure{}, false, errDown
}
func (downStore) Close() error { return nil }

// TestCheckTellsAStoreFailureFromABrokenPromise: on a store that cannot
// be reached, Check reports the cases as Errored, with the store's error,
// and none as Failed: nothing was learnt about the promises.
func TestCheckTellsAStoreFailureFromABrokenPromise(t *testing.T) {
	results := conformance.Check(t.Context(), conformance.Harness{
		New:     func(testing.TB) lease.Locker { return driver.NewLocker("down", downStore{}) },
		TTL:     100 * time.Millisecond,
		Tenures: 10,
	})
	errored := 0
	for _, r := range results {
		switch r.Outcome {
		case conformance.Failed:
			t.Errorf("%s: Failed on a store that cannot be reached, want Errored: %s", r.Case, r.Reason)
		case conformance.Errored:
			errored++
			if r.Reason == "" || !strings.Contains(r.Reason, errDown.Error()) {
				t.Errorf("%s: Errored without the store's error in its reason: %q", r.Case, r.Reason)
			}
		}
	}
	if errored == 0 {
		t.Fatal("no case was Errored on a store that cannot be reached")
	}
	// Under Run the same cases still fail their subtests, saying the
	// store failed: that is tested by every backend's conformance test
	// going red when its store is down.
}

// TestStoreErrorFromNewIsErrored: a Harness.New that cannot open the
// store ends the case with StoreError, which Check reports as Errored.
func TestStoreErrorFromNewIsErrored(t *testing.T) {
	results := conformance.Check(t.Context(), conformance.Harness{
		New: func(t testing.TB) lease.Locker {
			conformance.StoreError(t, "opening the store", errDown)
			return nil
		},
		TTL: 100 * time.Millisecond,
	})
	for _, r := range results {
		if r.Outcome != conformance.Errored && r.Outcome != conformance.Skipped {
			t.Errorf("%s: %s, want Errored (or Skipped) when New cannot open the store: %s", r.Case, r.Outcome, r.Reason)
		}
	}
	if r := results[0]; r.Outcome != conformance.Errored || !strings.Contains(r.Reason, "opening the store") || !strings.Contains(r.Reason, errDown.Error()) {
		t.Errorf("first case: %s %q, want Errored naming what failed and the error", r.Outcome, r.Reason)
	}
}

// TestCheckCutShortIsNoVerdict: when Check's context ends while cases
// run, what goes wrong in them after that is reported as Errored (or, for
// cases not started, Skipped), never as a broken promise.
func TestCheckCutShortIsNoVerdict(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	results := conformance.Check(ctx, toyHarness(""))
	var cut int
	for _, r := range results {
		switch r.Outcome {
		case conformance.Failed:
			t.Errorf("%s: Failed after the run was cut short: %s", r.Case, r.Reason)
		case conformance.Errored, conformance.Skipped:
			cut++
		}
	}
	if cut == 0 {
		t.Fatal("no case was cut short by a 300ms run")
	}
}
