package driver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func TestCheckAcquire(t *testing.T) {
	ok := []struct {
		name, owner string
		ttl         time.Duration
	}{
		{"a", "o", lease.MinTTL},
		{strings.Repeat("n", lease.MaxNameLen), strings.Repeat("o", lease.MaxOwnerLen), lease.MaxTTL},
		{"job:{report}/2026 \x00 ü", "host:1:ab", time.Minute},
	}
	for _, c := range ok {
		if err := driver.CheckAcquire(c.name, c.owner, c.ttl); err != nil {
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
		{"a", "o", lease.MinTTL - 1, "shorter than the minimum"},
		{"a", "o", lease.MaxTTL + 1, "longer than the maximum"},
	}
	for _, c := range bad {
		err := driver.CheckAcquire(c.name, c.owner, c.ttl)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("CheckAcquire(%q, %q, %s) = %v, want ErrInvalid mentioning %q", c.name, c.owner, c.ttl, err, c.mention)
		}
	}
}

func TestCheckLeaseNamesTheZeroLease(t *testing.T) {
	err := driver.CheckLease(lease.Lease{})
	if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "zero Lease") {
		t.Fatalf("CheckLease(zero) = %v", err)
	}
}

func TestDeadlineFromKeepsTheMonotonicReading(t *testing.T) {
	start := time.Now()
	d := driver.DeadlineFrom(start, time.Second)
	if want := start.Add(time.Second - lease.DriftMargin(time.Second)); !d.Equal(want) {
		t.Fatalf("DeadlineFrom = %s, want %s", d, want)
	}
	if !strings.Contains(d.String(), "m=") {
		t.Fatal("DeadlineFrom dropped the monotonic reading")
	}
}
