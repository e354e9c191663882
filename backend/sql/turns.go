package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
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
// retries at lease.Run's fallback (two seconds).
//
// A Locker whose marks table is missing (WithoutAutoCreate on a database
// whose operator did not create it, a role that may not create it) finds
// it out at setup, from the catalog question that finds the lease table:
// its WatchTurn reports errors.ErrUnsupported, so that lease.Run falls
// back to Watch, and its releases wake every watch. SQLite and MySQL
// Lockers, and PostgreSQL Lockers without a Listener, cannot watch at all
// and report errors.ErrUnsupported from WatchTurn as from Watch. Without
// marks there is no line: AcquireOrWait is Acquire (Mark.Fair holds
// nothing back) and StopWaiting does nothing. The store type is a
// driver.TurnWatcher on every dialect all the same; only WatchTurn says
// at run time that it keeps no line.

var _ driver.TurnWatcher = (*store)(nil)

// turns reports whether the store keeps marks: PostgreSQL with a Listener
// and a marks table. The store must be set up.
func (s *store) turns() bool { return s.listener != nil && s.marks != "" }

// WatchTurn implements driver.TurnWatcher: Watch, whose watch wakes only
// when a release chose waiter's mark or found none (and when the listening
// connection dropped).
func (s *store) WatchTurn(ctx context.Context, name, waiter string) (lease.Watch, error) {
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
// time left). It takes one of the Acquires' turns on a bounded pool, as
// Acquire does. When every turn is taken and m.Fair is false, it goes out
// in a shared takeover statement, as Acquire would, and only when that
// finds the name held does a statement of its own follow, to place the
// mark. (An AcquireOrWait that acquires in a shared statement leaves a
// mark placed before in place, until StopWaiting or its lapse.) A fair
// one waits for a turn instead: a shared statement knows no line. Without
// marks it is Acquire.
func (s *store) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	if err := s.setup(ctx); err != nil {
		return driver.Tenure{}, err
	}
	if !s.turns() {
		return s.Acquire(ctx, name, owner, ttl)
	}
	if slots := s.acquireSlots; slots != nil {
		select {
		case slots <- struct{}{}:
		default:
			if s.batches() && !m.Fair {
				// Every turn is taken: a burst of Acquires. Share a
				// statement with them (acquire_batch.go), and place the
				// mark with a statement of its own only if the name turns
				// out held, so that a burst of waiting Runs for free names
				// still goes out in batches.
				t, err := s.acquireBatched(ctx, name, owner, ttl)
				if err != nil || t.Owner == owner {
					return t, err
				}
			}
			if err := s.takeSlot(ctx, "Acquires"); err != nil {
				return driver.Tenure{}, err
			}
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
