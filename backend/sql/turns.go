package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
)

// Waiting for a turn (driver.TurnWatcher): one line of waiters per name,
// so that a release wakes one waiting Locker instead of every one, and
// fair waiting (Mark.Fair) is served in the line's order.
//
// A PostgreSQL Locker with a Listener and a marks table (schema.go) keeps
// the line of a name as the marks in that table, one row per waiting
// Locker and name: its waiter ID, when it was placed and when it lapses,
// by the database's clock. AcquireOrWait is the takeover statement with
// the mark's change, and with Mark.Fair the line's check, in it
// (postgresAcquireOrWait): one statement, one round trip, as Acquire.
// Release and ForceRelease stay one statement:
// when somebody watches the name (the advisory-lock try of
// postgresNotify fails), their NOTIFY names the waiter whose unlapsed
// mark was placed first (postgresNotifyTurn), and the listening side of
// each Locker wakes its turn watches of the name only when the payload
// names it or nobody. Plain watches wake at every notification, as do
// all watches when the payload names no waiter, which is also what a
// Locker of an earlier version sends (a fleet being upgraded): their
// releases wake every waiter, as before. A Locker of an earlier version
// does not understand a payload that names a waiter, so while both
// versions run, its watches miss the releases of the newer ones and it
// retries at lease.Run's retry interval (at most two seconds).
//
// A Locker whose marks table is missing (WithoutAutoCreate on a database
// whose operator did not create it, a role that may not create it) finds
// it out at setup, from the catalog question that finds the lease table:
// from then on its Can says no to driver.TurnWatcher (and its WatchTurn
// reports errors.ErrUnsupported), so that the Locker's waiters poll
// without a line and a fair wait fails at once, and its releases wake
// every watch. SQLite and MySQL Lockers, and PostgreSQL Lockers without a
// Listener, cannot watch at all: Can says no to driver.Watcher and
// driver.TurnWatcher, and Watch and WatchTurn report
// errors.ErrUnsupported. Without marks there is no line: AcquireOrWait is
// Acquire (Mark.Fair holds nothing back) and StopWaiting does nothing.
// The store type is a driver.TurnWatcher on every dialect all the same;
// Can (driver.Capable) says which of its interfaces work.

var (
	_ driver.TurnWatcher = (*store)(nil)
	_ driver.Capable     = (*store)(nil)
)

// Can implements driver.Capable. Every store lists, force-releases and
// renews in batches. Only a PostgreSQL store with a Listener watches
// (driver.Watcher), and only one that also has its marks table keeps a
// line (driver.TurnWatcher): whether it has one is known once the store
// is set up (its first operation); until then Can takes the table to be
// there, as auto-create or Schema makes it, and a store that finds it
// missing says so from then on (its first WatchTurn reports
// errors.ErrUnsupported, which the Locker heeds). Can says no to any
// other interface.
func (s *store) Can(p any) bool {
	switch p.(type) {
	case *driver.Lister, *driver.ForceReleaser, *driver.BatchRenewer:
		return true
	case *driver.Watcher:
		return s.listener != nil
	case *driver.TurnWatcher:
		// marks is written before ready and never after.
		return s.listener != nil && (!s.ready.Load() || s.marks != "")
	}
	return false
}

// turns reports whether the store keeps marks: PostgreSQL with a Listener
// and a marks table. The store must be set up.
func (s *store) turns() bool { return s.listener != nil && s.marks != "" }

// WatchTurn implements driver.TurnWatcher: Watch, whose watch wakes only
// when a release chose waiter's mark or found none (and when the listening
// connection dropped).
func (s *store) WatchTurn(ctx context.Context, name, waiter string) (driver.Watch, error) {
	if s.listener == nil {
		return nil, fmt.Errorf("the Locker has no Listener (WithListener, PostgreSQL only): %w", errors.ErrUnsupported)
	}
	if err := s.setup(ctx); err != nil {
		return nil, err // setup described it
	}
	if !s.turns() {
		return nil, s.fail(fmt.Errorf("%s: %w", s.noMarks, errors.ErrUnsupported))
	}
	return s.watch(ctx, name, waiter)
}

// AcquireOrWait implements driver.TurnWatcher with one statement
// (q.acquireOrWait), which with m.Fair also holds a free name back for
// the waiter first in line (answering an empty Owner and the first mark's
// time left). On a bounded pool it takes one of the Acquires' turns
// (acquireSlots), as Acquire does, and waits for one while every turn is
// taken; it never goes out in a shared takeover statement
// (acquire_batch.go), which knows neither marks nor the line, so that one
// that acquires always removes (or, with m.Keep, moves) the waiter's
// mark. Only a Locker's first waiter of a name sends it (driver.Locker's
// line), so a burst of waiting Runs sends one per Locker and name; a
// burst of plain Acquires still shares statements. Without marks it is
// Acquire.
func (s *store) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	if err := s.setup(ctx); err != nil {
		return driver.Tenure{}, err
	}
	if !s.turns() {
		return s.Acquire(ctx, name, owner, ttl)
	}
	if slots := s.acquireSlots; slots != nil {
		if err := s.takeSlot(ctx, "Acquires"); err != nil {
			return driver.Tenure{}, err
		}
		defer func() { <-slots }()
	}
	var (
		gotOwner               string
		token, exp, nowMs, acq int64
	)
	err := retry(ctx, s.dialect, func() error {
		err := s.db.QueryRowContext(ctx, s.q.acquireOrWait, key(name), []byte(name), owner, ttlMillis(ttl), s.host,
			m.Waiter, ttlMillis(m.Life), m.Keep, m.Fair).
			Scan(&gotOwner, &token, &exp, &nowMs, &acq)
		if errors.Is(err, sql.ErrNoRows) {
			err = errOvertaken // see postgresAcquireOrWait
		}
		return err
	})
	if err != nil {
		return driver.Tenure{}, s.fail(err)
	}
	return taken(name, gotOwner, token, exp, nowMs, acq), nil
}

// StopWaiting implements driver.TurnWatcher with one statement
// (q.stopWaiting), which also passes the turn on when the waiter's mark
// was first and the name is free (the release chose a waiter that gave
// up). Without marks it does nothing.
func (s *store) StopWaiting(ctx context.Context, name, waiter string) error {
	if err := s.setup(ctx); err != nil {
		return err
	}
	if !s.turns() {
		return nil
	}
	err := retry(ctx, s.dialect, func() error {
		_, err := s.db.ExecContext(ctx, s.q.stopWaiting, key(name), waiter)
		return err
	})
	if err != nil {
		return s.fail(err)
	}
	return nil
}
