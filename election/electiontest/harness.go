package electiontest

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
	// New returns a Locker on the store under test, as another process's
	// connection would be: each candidate of a case gets its own. Run
	// closes every Locker it got when the case ends; some cases close one
	// earlier, to play a leader that crashed without releasing. Lockers
	// from one Harness must share one store. Required.
	New func(t testing.TB) lease.Locker

	// TTL is the candidates' lease ttl. Keep it short, since the crash
	// cases wait for a lease to expire, but long enough that a renewal
	// every TTL/3 lands on a loaded machine, and at least the store's
	// granularity (etcd: 1s). Required.
	TTL time.Duration

	// ExpiryLag is how long after a tenure's expiry the store may still
	// report it held (etcd's lessor revokes expired leases every 500ms).
	ExpiryLag time.Duration

	// URL is a lease.Open URL of the same store (same database and table,
	// same key prefix), for the cases that run candidates in other
	// processes (see Child). Empty skips those cases: a memory store
	// cannot be shared between processes.
	URL string

	// Prefix is put before every office name the suite uses, so runs
	// against a persistent store never meet. Zero means a random prefix
	// per Run.
	Prefix string

	// Timeout bounds each case. Zero means 60s plus 20 TTLs.
	Timeout time.Duration
}

// withDefaults checks h and fills in its zero fields.
func (h Harness) withDefaults() (Harness, error) {
	switch {
	case h.New == nil:
		return h, errors.New("electiontest: Harness.New is nil")
	case h.TTL < lease.MinTTL:
		return h, errors.New("electiontest: Harness.TTL must be at least lease.MinTTL")
	case h.ExpiryLag < 0:
		return h, errors.New("electiontest: Harness.ExpiryLag must not be negative")
	}
	if h.Prefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		h.Prefix = "electiontest-" + hex.EncodeToString(b[:]) + "/"
	}
	if h.Timeout <= 0 {
		h.Timeout = 60*time.Second + 20*h.TTL
	}
	return h, nil
}

// replaceBound is how long a dead leader may keep the office on h's
// store, at most: its ttl, the store's expiry lag, and a slack for a
// loaded machine (two ttls or two seconds, whichever is longer: SQLite
// under a load average of 15 took 1.5s past the dead leader's Deadline).
func (h Harness) replaceBound() time.Duration {
	return h.TTL + h.ExpiryLag + max(2*h.TTL, 2*time.Second)
}
