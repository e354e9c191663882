package fence

import (
	"errors"
	"fmt"
	"math"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// MaxToken is the largest token a checker accepts: the largest BIGINT, so
// that every store keeps tokens as exact integers. Every backend of the
// lease package hands out tokens far below it (the largest, SQL's, are
// about 2^50 today).
const MaxToken = math.MaxInt64

// ErrStale means a write was refused because a write with a larger token
// was accepted before for the same name. Nothing was changed. The error is
// (or wraps) a *StaleError with the details; match it with errors.Is.
var ErrStale = errors.New("fence: stale token")

// StaleError reports a refused write. It matches ErrStale with errors.Is;
// get it with errors.As to read the details.
type StaleError struct {
	// Name is the lease name the write was tagged with.
	Name string
	// Token is the token the write presented.
	Token uint64
	// Max is the largest token accepted for Name before the write: the
	// newer holder's, larger than Token.
	Max uint64
}

// Error names the lease, the refused token and the one that beat it.
func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: write for %q with token %d refused: token %d was accepted before (a newer holder has written)", e.Name, e.Token, e.Max)
}

// Is makes errors.Is(err, ErrStale) true for a *StaleError.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Validate reports whether name and token may be presented to a checker:
// name as driver.CheckName requires (non-empty UTF-8, at most
// lease.MaxNameLen bytes, any characters), token between 1 and MaxToken
// (zero is no tenure's token). Every checker calls it before touching its
// store; the error matches lease.ErrInvalid.
func Validate(name string, token uint64) error {
	if err := driver.CheckName(name); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	switch {
	case token == 0:
		return fmt.Errorf("fence: %w: token 0 for %q: no tenure has token 0 (pass Lease.Token)", lease.ErrInvalid, name)
	case token > MaxToken:
		return fmt.Errorf("fence: %w: token %d for %q is larger than the maximum of %d", lease.ErrInvalid, token, name, uint64(MaxToken))
	}
	return nil
}
