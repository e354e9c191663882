package redislease

import (
	"context"
	"time"

	"github.com/leasekit/lease/driver"
)

var ()

// AcquireQueued implements driver.FairAcquirer with one run of queue.lua
// followed by acquire.lua, in one script: the name's line is a sorted set
// of owners by the server's TIME when they joined, with a hash of when
// each place lapses; both expire with the last place. A caller first in
// line (or already holding the name) leaves the line and acquires as
// Acquire would; a caller behind another while the name is free is told
// to wait for that owner, with the time its place has left.
func (s *store) AcquireQueued(ctx context.Context, name, owner string, ttl, place time.Duration) (driver.Tenure, error) {
	tag := tagOf(name)
	ms := ttlMillis(ttl)
	keys := []string{s.key(&tag, leaseSuffix, ""), s.key(&tag, tokenSuffix, ""), s.key(&tag, queueSuffix, ""), s.key(&tag, placesSuffix, "")}
	v, err := s.runScript(ctx, fairScript, keys, name, owner, ms, ttlMillis(place))
	if err != nil {
		return driver.Tenure{}, callErr(ctx, err)
	}
	return parseAcquire(v, owner, ms)
}

// Dequeue implements driver.FairAcquirer with one run of dequeue.lua,
// which also wakes the name's watchers when the owner had a place: the
// next waiter may be first now.
func (s *store) Dequeue(ctx context.Context, name, owner string) error {
	base := s.keyBase(name)
	if err := dequeueScript.Run(ctx, s.client, []string{base + queueSuffix, base + placesSuffix}, owner).Err(); err != nil {
		return callErr(ctx, err)
	}
	return nil
}
