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
