package lease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheckAcquire(t *testing.T) {
	ok := []struct {
		name, owner string
		ttl         time.Duration
	}{
		{"a", "o", time.Millisecond},
		{strings.Repeat("n", lease.MaxNameLen), strings.Repeat("o", lease.MaxOwnerLen), lease.MaxTTL},
		{"job:{report}/2026 \x00 ü", "host:1:ab", time.Minute},
	}
	for _, c := range ok {
		if err := lease.CheckAcquire(c.name, c.owner, c.ttl); err != nil {
			t.Errorf("CheckAcquire(%q, %q, %s) = %v, want nil", c.name, c.owner, c.ttl, err)
		}
	}
	bad := []struct {
		name, owner string
		ttl         time.Duration
		mention     string
	}{
		{"", "o", time.Second, "name is empty"},
		{strings.Repeat("n", lease.MaxNameLen+1), "o", time.Second, "1025 bytes"},
		{"\xff", "o", time.Second, "not valid UTF-8"},
		{"a", "", time.Second, "owner is empty"},
		{"a", strings.Repeat("o", lease.MaxOwnerLen+1), time.Second, "owner is 256 bytes"},
		{"a", "o\x00", time.Second, "NUL"},
		{"a", "o", 0, "not positive"},
		{"a", "o", time.Microsecond, "shorter than the minimum"},
		{"a", "o", lease.MaxTTL + 1, "longer than the maximum"},
	}
	for _, c := range bad {
		err := lease.CheckAcquire(c.name, c.owner, c.ttl)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("CheckAcquire(%q, %q, %s) = %v, want ErrInvalid mentioning %q", c.name, c.owner, c.ttl, err, c.mention)
		}
	}
}

func TestCheckLeaseNamesTheZeroLease(t *testing.T) {
	err := lease.CheckLease(lease.Lease{})
	if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "zero Lease") {
		t.Fatalf("CheckLease(zero) = %v", err)
	}
}

func TestNewOwnerIsUniqueAndReadable(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		o := lease.NewOwner()
		if seen[o] {
			t.Fatalf("NewOwner repeated %q", o)
		}
		seen[o] = true
		if err := lease.CheckOwner(o); err != nil {
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

func TestDeadlineFromKeepsTheMonotonicReading(t *testing.T) {
	start := time.Now()
	d := lease.DeadlineFrom(start, time.Second)
	if want := start.Add(time.Second - lease.DriftMargin(time.Second)); !d.Equal(want) {
		t.Fatalf("DeadlineFrom = %s, want %s", d, want)
	}
	if !strings.Contains(d.String(), "m=") {
		t.Fatal("DeadlineFrom dropped the monotonic reading")
	}
}
