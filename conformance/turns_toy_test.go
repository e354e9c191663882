package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/line"
)

// The toy's line of waiters: marks in placement order, one per waiting
// Locker, and the waits each Locker took. It keeps no fair line (a fair
// wait is refused as unsupported). Mode turn-wakes-all wakes every
// waiter at a release; mode turn-mark-never-lapses keeps marks past their
// life.
type toyTurns struct {
	mu    sync.Mutex
	marks map[string][]toyMark
	waits map[string]map[*line.Wait]*toy
}

type toyMark struct {
	waiter *toy
	lapse  time.Time
}

// acquireInLine is Acquire for a caller that waits with w.
func (l *toy) acquireInLine(ctx context.Context, w *line.Wait, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if w.Fair {
		return lease.Lease{}, fmt.Errorf("toy: fair waiting: %w", errors.ErrUnsupported)
	}
	ts := &l.turns
	ts.mu.Lock()
	if ts.waits == nil {
		ts.waits, ts.marks = map[string]map[*line.Wait]*toy{}, map[string][]toyMark{}
	}
	if ts.waits[name] == nil {
		ts.waits[name] = map[*line.Wait]*toy{}
	}
	if w.Take(func(bool) { l.leaveLine(name, w) }) {
		ts.waits[name][w] = l
	}
	keep := l.waitsFor(name) > 1
	ts.mu.Unlock()

	got, err := l.acquirePlain(ctx, name, owner, ttl)
	if err == nil && l.is("turn-deadline-late") {
		// The waiting path reads the clock after the reply.
		got.Deadline = time.Now().Add(ttl - lease.DriftMargin(ttl)/4)
	}
	if err != nil && !errors.Is(err, lease.ErrHeld) {
		return got, err
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	marks := l.liveMarks(name)
	i := slices.IndexFunc(marks, func(m toyMark) bool { return m.waiter == l })
	lapse := time.Now().Add(w.Life())
	switch {
	case err != nil && i >= 0:
		marks[i].lapse = lapse
	case err != nil:
		marks = append(marks, toyMark{waiter: l, lapse: lapse})
	default:
		if i >= 0 {
			marks = slices.Delete(marks, i, i+1)
		}
		if keep {
			marks = append(marks, toyMark{waiter: l, lapse: lapse})
		}
	}
	ts.marks[name] = marks
	return got, err
}

// leaveLine takes w out, and the Locker's mark with its last wait; when
// that mark was first, the turn passes on to the next.
func (l *toy) leaveLine(name string, w *line.Wait) {
	ts := &l.turns
	ts.mu.Lock()
	delete(ts.waits[name], w)
	first := false
	if l.waitsFor(name) == 0 {
		marks := l.liveMarks(name)
		first = len(marks) > 0 && marks[0].waiter == l
		ts.marks[name] = slices.DeleteFunc(marks, func(m toyMark) bool { return m.waiter == l })
	}
	ts.mu.Unlock()
	if first {
		l.wakeTurn(name)
	}
}

// waitsFor counts l's waits on name. l.turns.mu must be held.
func (l *toy) waitsFor(name string) (n int) {
	for _, o := range l.turns.waits[name] {
		if o == l {
			n++
		}
	}
	return n
}

// liveMarks drops name's lapsed marks (unless in mode
// turn-mark-never-lapses). l.turns.mu must be held.
func (l *toy) liveMarks(name string) []toyMark {
	if l.is("turn-mark-never-lapses") {
		return l.turns.marks[name]
	}
	now := time.Now()
	return slices.DeleteFunc(l.turns.marks[name], func(m toyMark) bool { return !now.Before(m.lapse) })
}

// wakeTurn wakes the waits of the Locker whose mark is oldest, or all of
// them when no mark is live (or in mode turn-wakes-all).
func (l *toy) wakeTurn(name string) {
	ts := &l.turns
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var chosen *toy
	if marks := l.liveMarks(name); len(marks) > 0 && !l.is("turn-wakes-all") {
		chosen = marks[0].waiter
	}
	for w, o := range ts.waits[name] {
		if chosen == nil || o == chosen {
			w.Wake()
		}
	}
}
