package memory

import (
	"context"
	"slices"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Waiting for a turn (driver.TurnWatcher): a name's marks are places, as
// in the fair queue, each a waiter's ID with the instant its mark lapses,
// kept in placement order. Release and ForceRelease wake the turn Watches
// of the first live mark's waiter only (notify).

// WatchTurn implements driver.TurnWatcher.
func (s *store) WatchTurn(ctx context.Context, name, waiter string) (lease.Watch, error) {
	return s.watch(ctx, name, waiter), nil
}

// AcquireOrWait implements driver.TurnWatcher: Acquire, and in the same
// step the mark of m.Waiter placed or renewed (held by another owner),
// removed, or placed at the back anew (acquired, with m.Keep).
func (s *store) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	got := s.acquire(name, owner, ttl, now)
	marks := s.liveMarks(name, now)
	i := slices.IndexFunc(marks, func(p place) bool { return p.owner == m.Waiter })
	switch {
	case got.Owner != owner && i >= 0:
		marks[i].expires = now.Add(m.Life)
	case got.Owner != owner:
		marks = append(marks, place{owner: m.Waiter, expires: now.Add(m.Life)})
	default:
		if i >= 0 {
			marks = slices.Delete(marks, i, i+1)
		}
		if m.Keep {
			marks = append(marks, place{owner: m.Waiter, expires: now.Add(m.Life)})
		}
	}
	s.setMarks(name, marks)
	return got, nil
}

// StopWaiting implements driver.TurnWatcher. When waiter's mark was first
// and the name is free, a release most likely chose waiter, which gives up
// instead of acquiring: the turn passes on to the next mark, as Redis
// passes it.
func (s *store) StopWaiting(ctx context.Context, name, waiter string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	marks := s.liveMarks(name, now)
	first := len(marks) > 0 && marks[0].owner == waiter
	s.setMarks(name, slices.DeleteFunc(marks, func(p place) bool { return p.owner == waiter }))
	if _, held := s.current(name, now); first && !held {
		s.notify(name)
	}
	return nil
}

// liveMarks returns name's unlapsed marks in placement order, dropping
// the lapsed ones. s.mu must be held.
func (s *store) liveMarks(name string, now time.Time) []place {
	m := slices.DeleteFunc(s.marks[name], func(p place) bool { return !now.Before(p.expires) })
	s.setMarks(name, m)
	return m
}

// setMarks stores name's marks. s.mu must be held.
func (s *store) setMarks(name string, m []place) {
	if len(m) == 0 {
		delete(s.marks, name)
		return
	}
	s.marks[name] = m
}
