package redislease

import "time"

// SetWatchLimits sets how long l keeps a subscription without a Watch,
// and how many such subscriptions it keeps (0: maxLingering), in place of
// watchLinger and maxLingering. It must come before l's first Watch.
func SetWatchLimits(l *Locker, linger time.Duration, most int) {
	h := &l.s.subs
	h.mu.Lock()
	defer h.mu.Unlock()
	h.linger = linger
	h.most = most
}

// Lanes is how many requests of Acquire, Renew and Release one Locker
// has on the wire at once before later calls queue for a pipeline.
const Lanes = lanes

// Waiting returns how many calls of l wait in its queue for a pipeline.
func Waiting(l *Locker) int { return l.s.pipes.Waiting() }
