package semaphoretest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Harness describes the store under test to Run and Check.
type Harness struct {
	// New returns a Locker on the store under test, as another process's
	// connection would be: each holder of a case gets its own. The suite
	// closes every Locker it got when the case ends; the crash case closes
	// one earlier, to play a holder that died without releasing. Lockers
	// from one Harness must share one store. Required.
	New func(t testing.TB) lease.Locker

	// TTL is the holders' lease ttl. Keep it short, since some cases wait
	// for a lease to expire, but long enough that a renewal every TTL/3
	// lands on a loaded machine, and at least the store's granularity
	// (etcd: 1s). Required.
	TTL time.Duration

	// ExpiryLag is how long after a tenure's expiry the store may still
	// report it held (etcd's lessor revokes expired leases every 500ms).
	ExpiryLag time.Duration

	// Prefix is put before every semaphore name the suite uses, so runs
	// against a persistent store never meet. Zero means a random prefix
	// per run.
	Prefix string

	// Timeout bounds each case. Zero means 30s plus 20 TTLs.
	Timeout time.Duration
}

// withDefaults checks h and fills in its zero fields.
func (h Harness) withDefaults() (Harness, error) {
	switch {
	case h.New == nil:
		return h, errors.New("semaphoretest: Harness.New is nil")
	case h.TTL < lease.MinTTL:
		return h, errors.New("semaphoretest: Harness.TTL must be at least lease.MinTTL")
	case h.ExpiryLag < 0:
		return h, errors.New("semaphoretest: Harness.ExpiryLag must not be negative")
	}
	if h.Prefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		h.Prefix = "semaphoretest-" + hex.EncodeToString(b[:]) + "/"
	}
	if h.Timeout <= 0 {
		h.Timeout = 30*time.Second + 20*h.TTL
	}
	return h, nil
}

// freeBound is how long a crashed holder may keep its slot on h's store,
// at most: its ttl, the store's expiry lag, and a slack for a loaded
// machine (two ttls or two seconds, whichever is longer).
func (h Harness) freeBound() time.Duration {
	return h.TTL + h.ExpiryLag + max(2*h.TTL, 2*time.Second)
}
