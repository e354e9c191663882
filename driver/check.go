package driver

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasekit/lease"
)

// CheckName reports whether name is a valid lease name: non-empty, valid
// UTF-8, at most lease.MaxNameLen bytes. Any such string is legal,
// including spaces, slashes, braces, colons, NUL and other control
// characters, and distinct names never share a lease. The error matches
// lease.ErrInvalid.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: name is empty", lease.ErrInvalid)
	case len(name) > lease.MaxNameLen:
		return fmt.Errorf("%w: name is %d bytes, longer than the limit of %d", lease.ErrInvalid, len(name), lease.MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: name %s is not valid UTF-8", lease.ErrInvalid, Quote(name))
	}
	return nil
}

// CheckOwner reports whether owner is a valid owner: non-empty, valid
// UTF-8 without NUL, at most lease.MaxOwnerLen bytes. The error matches
// lease.ErrInvalid.
func CheckOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: owner is empty", lease.ErrInvalid)
	case len(owner) > lease.MaxOwnerLen:
		return fmt.Errorf("%w: owner is %d bytes, longer than the limit of %d", lease.ErrInvalid, len(owner), lease.MaxOwnerLen)
	case !utf8.ValidString(owner):
		return fmt.Errorf("%w: owner %q is not valid UTF-8", lease.ErrInvalid, owner)
	case strings.IndexByte(owner, 0) >= 0:
		return fmt.Errorf("%w: owner %q contains a NUL byte", lease.ErrInvalid, owner)
	}
	return nil
}

// CheckTTL reports whether ttl is a valid lease duration: between
// lease.MinTTL and lease.MaxTTL. The error matches lease.ErrInvalid.
func CheckTTL(ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return fmt.Errorf("%w: ttl %s is not positive", lease.ErrInvalid, ttl)
	case ttl < lease.MinTTL:
		return fmt.Errorf("%w: ttl %s is shorter than the minimum of %s (a shorter lease would end, by its Deadline, before the store could answer)", lease.ErrInvalid, ttl, lease.MinTTL)
	case ttl > lease.MaxTTL:
		return fmt.Errorf("%w: ttl %s is longer than the maximum of %s", lease.ErrInvalid, ttl, lease.MaxTTL)
	}
	return nil
}

// CheckAcquire validates the arguments of lease.Locker.Acquire.
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
func CheckLease(l lease.Lease) error {
	if l.Name == "" && l.Owner == "" && l.Token == 0 {
		return fmt.Errorf("%w: zero Lease (pass the Lease that Acquire returned)", lease.ErrInvalid)
	}
	if err := CheckName(l.Name); err != nil {
		return err
	}
	if err := CheckOwner(l.Owner); err != nil {
		return err
	}
	if l.Token == 0 {
		return fmt.Errorf("%w: lease %s has token 0, which no tenure has", lease.ErrInvalid, Quote(l.Name))
	}
	return nil
}

// CheckRenew validates the arguments of lease.Locker.Renew.
func CheckRenew(l lease.Lease, ttl time.Duration) error {
	if err := CheckLease(l); err != nil {
		return err
	}
	return CheckTTL(ttl)
}

// DeadlineFrom returns the Deadline of a tenure granted or renewed for ttl
// by a request sent after start, which must be a time.Now() reading taken
// before the request was sent (so it carries the monotonic clock): start +
// ttl − lease.DriftMargin(ttl).
func DeadlineFrom(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - lease.DriftMargin(ttl))
}
