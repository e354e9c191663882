package memory

import (
	"sync"
	"time"
)

// Clock tells the store's time. The default is the system clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to, for tests that
// drive expiry without sleeping. It is safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock that reads start until moved.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start.Round(0)}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d. A negative d panics: the store's
// clock never goes backwards.
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		panic("memory: ManualClock.Advance with a negative duration")
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
