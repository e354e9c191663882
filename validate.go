package lease

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on the arguments every Locker accepts. They are part of the
// contract: every backend stores names up to MaxNameLen and owners up to
// MaxOwnerLen without truncation or collision.
const (
	// MaxNameLen is the longest name, in bytes.
	MaxNameLen = 1024
	// MaxOwnerLen is the longest owner, in bytes.
	MaxOwnerLen = 255
	// MinTTL is the shortest ttl: stores count time in milliseconds.
	MinTTL = time.Millisecond
	// MaxTTL is the longest ttl. A lease is for work that renews it; a
	// tenure longer than a year is a configuration mistake.
	MaxTTL = 365 * 24 * time.Hour
)

// CheckName reports whether name is a valid lease name: non-empty, valid
// UTF-8, at most MaxNameLen bytes. Any such string is legal, including
// spaces, slashes, braces, colons, NUL and other control characters, and
// distinct names never share a lease. The error matches ErrInvalid.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: name is empty", ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name is %d bytes, longer than the limit of %d", ErrInvalid, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: name %q is not valid UTF-8", ErrInvalid, name)
	}
	return nil
}

// CheckOwner reports whether owner is a valid owner: non-empty, valid
// UTF-8 without NUL, at most MaxOwnerLen bytes. The error matches
// ErrInvalid.
func CheckOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: owner is empty", ErrInvalid)
	case len(owner) > MaxOwnerLen:
		return fmt.Errorf("%w: owner is %d bytes, longer than the limit of %d", ErrInvalid, len(owner), MaxOwnerLen)
	case !utf8.ValidString(owner):
		return fmt.Errorf("%w: owner %q is not valid UTF-8", ErrInvalid, owner)
	case strings.IndexByte(owner, 0) >= 0:
		return fmt.Errorf("%w: owner %q contains a NUL byte", ErrInvalid, owner)
	}
	return nil
}

// CheckTTL reports whether ttl is a valid lease duration: between MinTTL
// and MaxTTL. The error matches ErrInvalid.
func CheckTTL(ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return fmt.Errorf("%w: ttl %s is not positive", ErrInvalid, ttl)
	case ttl < MinTTL:
		return fmt.Errorf("%w: ttl %s is shorter than the minimum of %s", ErrInvalid, ttl, MinTTL)
	case ttl > MaxTTL:
		return fmt.Errorf("%w: ttl %s is longer than the maximum of %s", ErrInvalid, ttl, MaxTTL)
	}
	return nil
}

// CheckAcquire validates the arguments of Locker.Acquire. Every backend
// calls it before touching its store.
func CheckAcquire(name, owner string, ttl time.Duration) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := CheckOwner(owner); err != nil {
		return err
	}
	return CheckTTL(ttl)
}

// CheckLease validates a Lease passed to Renew or Release: it must carry a
// valid name and owner and a non-zero Token, as every Lease returned by
// Acquire does. The zero Lease fails with "zero Lease".
func CheckLease(l Lease) error {
	if l.Name == "" && l.Owner == "" && l.Token == 0 {
		return fmt.Errorf("%w: zero Lease (pass the Lease that Acquire returned)", ErrInvalid)
	}
	if err := CheckName(l.Name); err != nil {
		return err
	}
	if err := CheckOwner(l.Owner); err != nil {
		return err
	}
	if l.Token == 0 {
		return fmt.Errorf("%w: lease %q has token 0, which no tenure has", ErrInvalid, l.Name)
	}
	return nil
}

// CheckRenew validates the arguments of Locker.Renew.
func CheckRenew(l Lease, ttl time.Duration) error {
	if err := CheckLease(l); err != nil {
		return err
	}
	return CheckTTL(ttl)
}

// DriftMargin is how much earlier than start+ttl a Deadline ends: 1% of
// the ttl plus 2ms, covering the rate difference between this process's
// clock and the store's (Redlock's margin). Backends use it through
// DeadlineFrom; the conformance suite holds every backend to it.
func DriftMargin(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// DeadlineFrom returns the Deadline of a tenure granted or renewed for ttl
// by a request sent after start, which must be a time.Now() reading taken
// before the request was sent (so it carries the monotonic clock).
func DeadlineFrom(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - DriftMargin(ttl))
}
