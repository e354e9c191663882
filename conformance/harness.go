package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Harness describes the store under test to Run.
type Harness struct {
	// New returns a Locker on the store under test. Run calls it once per
	// subtest (and some subtests call it twice, to act as two processes on
	// one store) and closes every Locker it got when the subtest ends.
	// Lockers from one Harness must share one store. When the store
	// cannot be opened, New should end t with StoreError, so that Check
	// reports the case as Errored rather than as a broken promise.
	New func(t testing.TB) lease.Locker

	// TTL is the shortest lease the suite may use on this store; it must
	// be a multiple of the store's granularity. Expiry tests wait about
	// this long, so keep it short (50ms for memory or Redis, 1s for etcd).
	TTL time.Duration

	// Granularity is how far the store may round a ttl up (etcd: 1s, since
	// its leases have whole-second TTLs). Zero means 1ms.
	Granularity time.Duration

	// ExpiryLag is how long after a tenure's expiry the store may still
	// report it as held (etcd's lessor revokes expired leases every 500ms).
	// Zero means none beyond a small scheduling allowance.
	ExpiryLag time.Duration

	// Advance, when set, moves the store's clock forward by d instead of
	// the suite sleeping (the memory backend's manual clock, miniredis's
	// FastForward). Because it moves every name's clock at once, subtests
	// then run one at a time; otherwise they run in parallel.
	Advance func(d time.Duration)

	// Tenures is how many tenures the token-order test starts on one name.
	// Zero means 2000.
	Tenures int

	// Prefix is put before every name the suite uses, so runs against a
	// persistent store never meet each other's names. Zero means a random
	// prefix per Run.
	Prefix string

	// Addr is the store's TCP address, host:port, and NewAt returns a
	// Locker on the same store (same database, table, prefix) reached at
	// another address. With both set, the fault cases put a TCP proxy in
	// front of Addr and check that stalls, lost replies, resets and slow
	// answers come back as store failures by each call's deadline, never
	// as lease outcomes; without them those cases are skipped.
	Addr  string
	NewAt func(t testing.TB, addr string) lease.Locker

	// Parallel is how many cases Check runs at once. Zero means 8. (Run
	// leaves it to go test's -parallel flag.)
	Parallel int

	// NewSkewed returns a Locker on the same store whose process clock
	// reads skew ahead of the real time (skew may be negative), as on a
	// machine whose clock is off. The contract judges expiry by the
	// store's clock (line 7), so a store that reads no client clock for
	// expiry returns an ordinary Locker; one that does (a clock option,
	// a hook) returns a Locker on a shifted clock. With NewSkewed nil,
	// the clock-skew case is skipped and reports the store as proven on
	// one clock only: Lockers on machines whose clocks disagree are not
	// covered.
	NewSkewed func(t testing.TB, skew time.Duration) lease.Locker
}

// withDefaults checks h and fills in its zero fields.
func (h Harness) withDefaults() (Harness, error) {
	switch {
	case h.New == nil:
		return h, errors.New("conformance: Harness.New is nil")
	case h.TTL <= 0:
		return h, errors.New("conformance: Harness.TTL must be positive")
	case h.Parallel < 0:
		return h, errors.New("conformance: Harness.Parallel must not be negative")
	}
	if h.Granularity <= 0 {
		h.Granularity = time.Millisecond
	}
	if h.Tenures <= 0 {
		h.Tenures = 2000
	}
	if h.Parallel == 0 {
		h.Parallel = 8
	}
	if h.Prefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		h.Prefix = "conformance-" + hex.EncodeToString(b[:]) + "/"
	}
	return h, nil
}
