package redislease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasekit/lease/driver"
)

var (
	_ driver.TurnWatcher = (*store)(nil)
)

// Waiting for a turn (driver.TurnWatcher). The marks of a name's waiting
// Lockers are two sorted sets in the slot of its other keys (marks.lua):
// <base>:marks, each waiter ID scored by the server's TIME in microseconds
// when its mark was placed, and <base>:lapses, each scored by when it
// lapses. AcquireOrWait changes the caller's mark in the script that
// attempts the acquisition (wait.lua before acquire.lua: one EVALSHA).
// Release and ForceRelease drop the lapsed marks, choose the live one
// placed first, and name it in the message they publish on the name's
// channel, "<token> <waiter>" ("<token>" alone when no mark is live); a
// turn Watch wakes only at a message that names its waiter or names none.
// With the fair policy (Mark.Fair), wait.lua keeps a free name for that
// same first live mark. See "Waiting" in the package documentation for
// the line's invariant.

// WatchTurn implements driver.TurnWatcher: it is Watch, on the same
// subscription, for a Watch that wakes only at the messages that name
// waiter or no waiter (see wake), and at every drop of the pub/sub
// connection. A Ring client cannot watch: it reports
// errors.ErrUnsupported.
func (s *store) WatchTurn(ctx context.Context, name, waiter string) (driver.Watch, error) {
	return s.watch(ctx, name, true, waiter)
}

// AcquireOrWait implements driver.TurnWatcher with one run of marks.lua,
// wait.lua and acquire.lua, in one script: Acquire's answer, with
// m.Waiter's mark placed or renewed when another owner holds the name,
// and removed (or placed at the back anew, with m.Keep) when the caller
// acquires. With m.Fair, a free name whose first live mark is another
// waiter's is not acquired: the mark is placed or renewed as for a held
// name, and the answer has no Owner and the Remaining of the first mark.
// The mark lapses m.Life (rounded up to a whole millisecond) after the
// server's TIME, and the keys that hold the marks expire when the last of
// them lapses.
func (s *store) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	tag := tagOf(name)
	ms := ttlMillis(ttl)
	keys := []string{s.key(&tag, leaseSuffix, ""), s.key(&tag, tokenSuffix, ""), s.key(&tag, marksSuffix, ""), s.key(&tag, lapsesSuffix, "")}
	v, err := s.runScript(ctx, waitScript, keys, name, owner, ms, m.Waiter, max(ttlMillis(m.Life), 1), flag(m.Keep), flag(m.Fair))
	if err != nil {
		return driver.Tenure{}, callErr(ctx, err)
	}
	return parseAcquire(v, owner, ms)
}

// StopWaiting implements driver.TurnWatcher with one run of unmark.lua,
// which removes waiter's mark. When that mark was the first in line while
// the name is free (a release chose the waiter, which gives up instead of
// acquiring), it passes the turn on to the next mark, or to every turn
// Watch when none is left, as a release would have.
func (s *store) StopWaiting(ctx context.Context, name, waiter string) error {
	tag := tagOf(name)
	keys := []string{s.key(&tag, leaseSuffix, ""), s.key(&tag, marksSuffix, ""), s.key(&tag, lapsesSuffix, "")}
	if err := unmarkScript.Run(ctx, s.client, keys, waiter).Err(); err != nil {
		return callErr(ctx, err)
	}
	return nil
}

// dequeuedMessage is what versions of this package with a separate fair
// queue publish when a place in it goes (their dequeue.lua): in a fleet
// of mixed versions it reaches this version's Watches, and concerns no
// turn Watch.
const dequeuedMessage = "dequeued"

// wake wakes the Watches on sb that a message with payload on its
// channel concerns. A plain Watch wakes at every message. A turn Watch
// wakes at a message that names its waiter ("<token> <waiter>" from a
// release, "passed <waiter>" from StopWaiting) and at one that names no
// waiter (a release that found no live mark, or a release by a version
// of this package before marks, which publishes "<token>" alone), but
// not at a message that names another waiter, nor at an older version's
// "dequeued". The caller holds the hub's lock.
func wake(sb *sub, payload string) {
	what, waiter, named := strings.Cut(payload, " ")
	switch {
	case named:
		sb.Wake(true, false, waiter)
	case what == dequeuedMessage:
		sb.Wake(true, false, "")
	default:
		sb.Wake(true, true, "")
	}
}

// flag is a boolean script argument: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ringUnsupported is the error of Watch and WatchTurn on a Ring client.
func ringUnsupported() error {
	return fmt.Errorf("a Ring client cannot watch: %w", errors.ErrUnsupported)
}
