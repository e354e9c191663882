package conformance_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// The toy's lease.TurnWaiter: marks in placement order, and the turn
// Watches of each Locker. Mode turn-wakes-all wakes every turn Watch at a
// release; mode turn-mark-never-lapses keeps marks past lease.MarkLife.
type toyTurns struct {
	mu      sync.Mutex
	marks   map[string][]toyMark
	watches map[string]map[*toyTurnWatch]struct{}
}

type toyMark struct {
	waiter *toy
	lapse  time.Time
}

type toyTurnWatch struct {
	l    *toy
	name string
	c    chan struct{}
	once sync.Once
}

func (w *toyTurnWatch) Changed() <-chan struct{} { return w.c }

// Stop takes the Watch away, and the Locker's mark with its last Watch.
func (w *toyTurnWatch) Stop() {
	w.once.Do(func() {
		ts := &w.l.turns
		ts.mu.Lock()
		defer ts.mu.Unlock()
		delete(ts.watches[w.name], w)
		if w.l.turnWatches(w.name) == 0 {
			ts.marks[w.name] = slices.DeleteFunc(ts.marks[w.name], func(m toyMark) bool { return m.waiter == w.l })
		}
	})
}

// turnWatches counts l's turn Watches on name. l.turns.mu must be held.
func (l *toy) turnWatches(name string) (n int) {
	for w := range l.turns.watches[name] {
		if w.l == l {
			n++
		}
	}
	return n
}

func (l *toy) WatchTurn(ctx context.Context, name string) (lease.Watch, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	w := &toyTurnWatch{l: l, name: name, c: make(chan struct{}, 1)}
	ts := &l.turns
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.watches == nil {
		ts.watches, ts.marks = map[string]map[*toyTurnWatch]struct{}{}, map[string][]toyMark{}
	}
	if ts.watches[name] == nil {
		ts.watches[name] = map[*toyTurnWatch]struct{}{}
	}
	ts.watches[name][w] = struct{}{}
	return w, nil
}

func (l *toy) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	got, err := l.Acquire(ctx, name, owner, ttl)
	if err == nil && l.is("turn-deadline-late") {
		// The waiting path reads the clock after the reply.
		got.Deadline = time.Now().Add(ttl - lease.DriftMargin(ttl)/4)
	}
	if err != nil && !errors.Is(err, lease.ErrHeld) {
		return got, err
	}
	ts := &l.turns
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.marks == nil {
		return got, err // no turn Watch yet: nothing to mark for
	}
	marks := l.liveMarks(name)
	i := slices.IndexFunc(marks, func(m toyMark) bool { return m.waiter == l })
	lapse := time.Now().Add(lease.MarkLife)
	switch {
	case err != nil && i >= 0:
		marks[i].lapse = lapse
	case err != nil:
		marks = append(marks, toyMark{waiter: l, lapse: lapse})
	default:
		if i >= 0 {
			marks = slices.Delete(marks, i, i+1)
		}
		if l.turnWatches(name) > 1 {
			marks = append(marks, toyMark{waiter: l, lapse: lapse})
		}
	}
	ts.marks[name] = marks
	return got, err
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

// wakeTurn wakes the turn Watches of the Locker whose mark is oldest, or
// all of them when no mark is live (or in mode turn-wakes-all).
func (l *toy) wakeTurn(name string) {
	ts := &l.turns
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var chosen *toy
	if marks := l.liveMarks(name); len(marks) > 0 && !l.is("turn-wakes-all") {
		chosen = marks[0].waiter
	}
	for w := range ts.watches[name] {
		if chosen == nil || w.l == chosen {
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}
