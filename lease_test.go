package lease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewOwnerIsUniqueAndReadable(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		o := lease.NewOwner()
		if seen[o] {
			t.Fatalf("NewOwner repeated %q", o)
		}
		seen[o] = true
		if err := driver.CheckOwner(o); err != nil {
			t.Fatalf("NewOwner returned an invalid owner: %v", err)
		}
		if strings.Count(o, ":") < 3 {
			t.Fatalf("NewOwner %q lacks the host:pid:random:seq form", o)
		}
	}
}

func TestHeldErrorMatchesErrHeldOnly(t *testing.T) {
	var err error = &lease.HeldError{Name: "n", Owner: "o", Remaining: 1500 * time.Millisecond}
	if !errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("errors.Is mismatch for %v", err)
	}
	if got := err.Error(); !strings.Contains(got, `"o"`) || !strings.Contains(got, "1.5s") {
		t.Fatalf("HeldError message %q lacks holder or remaining time", got)
	}
}
