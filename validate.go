package lease

import "time"

// Limits on the arguments every Locker accepts. They are part of the
// contract: every backend stores names up to MaxNameLen and owners up to
// MaxOwnerLen without truncation or collision, and refuses anything
// outside these limits with an error matching ErrInvalid.
const (
	// MaxNameLen is the longest name, in bytes.
	MaxNameLen = 1024
	// MaxOwnerLen is the longest owner, in bytes.
	MaxOwnerLen = 255
	// MinTTL is the shortest ttl. A tenure's Deadline comes DriftMargin
	// before its ttl runs out; at 5ms that leaves about 3ms, and a ttl
	// under about 2ms would leave a Deadline that has passed before the
	// store could answer.
	MinTTL = 5 * time.Millisecond
	// MaxTTL is the longest ttl. A lease is for work that renews it; a
	// tenure longer than a year is a configuration mistake.
	MaxTTL = 365 * 24 * time.Hour
)

// DriftMargin is how much earlier than the end of its ttl a tenure's
// Deadline comes: 1% of the ttl plus 2ms, covering the rate difference
// between this process's clock and the store's (Redlock's margin). Every
// backend computes Deadlines with it, and the conformance suite holds them
// to it.
func DriftMargin(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}
