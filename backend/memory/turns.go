package memory

import (
	"context"
	"slices"
	"time"

	"github.com/leasekit/lease/driver"
)

// The line of waiters (driver.TurnWatcher): a name's marks, each a
// waiter's ID with the instant it lapses, kept in placement order.
// Release and ForceRelease wake the turn Watches of the first live mark's
// waiter only (notify); with Mark.Fair, only that waiter may take a free
// name.

// WatchTurn implements driver.TurnWatcher.
func (s *store) WatchTurn(ctx context.Context, name, waiter string) (driver.Watch, error) {
	return s.watch(ctx, name, waiter), nil
}

// AcquireOrWait implements driver.TurnWatcher: Acquire (unless m.Fair and
// another waiter is first in line), and in the same step the mark of
// m.Waiter placed or renewed (held by another owner, or not its turn),
// removed, or placed at the back anew (acquired, with m.Keep).
func (s *store) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	marks := s.liveMarks(name, now)
	i := slices.IndexFunc(marks, func(p mark) bool { return p.waiter == m.Waiter })
	var got driver.Tenure
	t, held := s.current(name, now)
	if m.Fair && !(held && t.owner == owner) && len(marks) > 0 && i != 0 {
		got = driver.Tenure{Name: name, Remaining: marks[0].expires.Sub(now)}
		if held {
			got = t.view(name, now)
		}
	} else {
		got = s.acquire(name, owner, ttl, now)
	}
	switch {
	case got.Owner != owner && i >= 0:
		marks[i].expires = now.Add(m.Life)
	case got.Owner != owner:
		marks = append(marks, mark{waiter: m.Waiter, expires: now.Add(m.Life)})
	default:
		if i >= 0 {
			marks = slices.Delete(marks, i, i+1)
		}
		if m.Keep {
			marks = append(marks, mark{waiter: m.Waiter, expires: now.Add(m.Life)})
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
	first := len(marks) > 0 && marks[0].waiter == waiter
	s.setMarks(name, slices.DeleteFunc(marks, func(p mark) bool { return p.waiter == waiter }))
	if _, held := s.current(name, now); first && !held {
		s.notify(name)
	}
	return nil
}

// liveMarks returns name's unlapsed marks in placement order, dropping
// the lapsed ones. s.mu must be held.
func (s *store) liveMarks(name string, now time.Time) []mark {
	m := slices.DeleteFunc(s.marks[name], func(p mark) bool { return !now.Before(p.expires) })
	s.setMarks(name, m)
	return m
}

// setMarks stores name's marks. s.mu must be held.
func (s *store) setMarks(name string, m []mark) {
	if len(m) == 0 {
		delete(s.marks, name)
		return
	}
	s.marks[name] = m
}
