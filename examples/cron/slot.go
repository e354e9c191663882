package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasekit/lease"
)

// Every is a schedule that fires at Offset past every Period, counted in
// UTC from midnight: Every{24 * time.Hour, 2 * time.Hour} fires daily at
// 02:00 UTC, Every{time.Hour, 0} on the hour. Period must be whole minutes
// and divide a day or be whole days; Offset must be whole minutes, shorter
// than Period.
type Every struct {
	Period, Offset time.Duration
}

// Slot returns the slot that t falls in: from the latest firing at or
// before t to the next firing.
func (e Every) Slot(t time.Time) (start, end time.Time) {
	// Truncate counts from the zero time, a midnight UTC, so every period
	// that divides a day, or is whole days, lines up with midnight.
	start = t.UTC().Add(-e.Offset).Truncate(e.Period).Add(e.Offset)
	return start, start.Add(e.Period)
}

// check says what is wrong with e, if anything.
func (e Every) check() error {
	day := 24 * time.Hour
	switch {
	case e.Period < time.Minute || e.Period%time.Minute != 0:
		return fmt.Errorf("schedule period %s: want whole minutes, at least one", e.Period)
	case day%e.Period != 0 && e.Period%day != 0:
		return fmt.Errorf("schedule period %s: want one that divides a day or is whole days", e.Period)
	case e.Offset < 0 || e.Offset >= e.Period || e.Offset%time.Minute != 0:
		return fmt.Errorf("schedule offset %s: want whole minutes, from 0 to less than the period %s", e.Offset, e.Period)
	}
	return nil
}

// SlotName is the lease name of job's slot that starts at start, such as
// "report@2026-12-02T02:00Z": one name per slot, so that the key left by a
// slot's run keeps that slot, and no other, to one run.
func SlotName(job string, start time.Time) string {
	return job + "@" + start.UTC().Format("2006-01-02T15:04Z")
}

// Job is a scheduled job.
type Job struct {
	Name     string // the job's name: its slots' lease names are Name@start
	Schedule Every
	// Run does the work of one slot. Its ctx ends a little before the slot
	// does (at the lease's Deadline): a run must not outlast its slot.
	Run func(ctx context.Context, slot Slot) error
}

// Slot is one slot of a job, as its run sees it.
type Slot struct {
	Name       string    // the lease name, Job.Name@Start
	Start, End time.Time // the slot
	Token      uint64    // the lease's fencing token: pass it to what the run writes to
}

// Clock tells the time. *memory.ManualClock is one a test can move.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Instance is one instance of a service that runs scheduled jobs. Every
// instance fires every job on schedule; Fire keeps each slot to one run.
type Instance struct {
	ID     string       // names the instance in the owner of the slots it takes
	Locker lease.Locker // the store every instance shares
	Clock  Clock        // tells the slot; nil means the system clock
}

// Fire runs job for the slot the clock is in, unless that slot is taken.
// The scheduler calls it when the job is due, on every instance, and an
// operator may call it again later to re-run the job by hand.
//
// Fire acquires the slot's lease name with a ttl that reaches the end of
// the slot, as a fresh owner (so that neither a second Fire on this
// instance nor a restarted process can re-enter the slot), and then:
//
//   - When the run succeeds, Fire does NOT release the lease: the key
//     stays in the store until the slot ends, as the record that the slot
//     is done, and every later Fire in the slot finds it held. No process
//     stays alive to hold it.
//   - When the run fails, Fire releases the lease, so that a retry in the
//     same slot (the scheduler's, an instance firing late, an operator's)
//     may run, and returns the run's error.
//   - When the instance crashes during the run (or the run panics), nothing
//     releases the lease: the slot stays taken until it ends, and is not
//     run again by itself. A run that died half-way may have done half its
//     work (sent half the mails), and running it again is a decision for
//     an operator: `lease release --force NAME` frees the slot, and the
//     next Fire in the slot runs the job. So a slot runs at most once.
//
// Fire returns nil when the run succeeded, a *lease.HeldError (matching
// lease.ErrHeld) when the slot was taken already, the run's error when it
// failed, and the store's error when the store could not be asked (the
// job did not run then).
func (in *Instance) Fire(ctx context.Context, job Job) error {
	if err := job.Schedule.check(); err != nil {
		return fmt.Errorf("job %q: %w", job.Name, err)
	}
	if job.Run == nil {
		return fmt.Errorf("job %q has no Run", job.Name)
	}
	clock := in.Clock
	if clock == nil {
		clock = systemClock{}
	}
	now := clock.Now()
	start, end := job.Schedule.Slot(now)
	name := SlotName(job.Name, start)
	// end is after now, but may be very close: the shortest ttl the
	// store takes leaves the run no time, so it fails, and releases.
	ttl := max(end.Sub(now), lease.MinTTL)
	held, err := in.Locker.Acquire(ctx, name, in.ID+"/"+lease.NewOwner(), ttl)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithDeadline(ctx, held.Deadline)
	err = job.Run(runCtx, Slot{Name: name, Start: start, End: end, Token: held.Token})
	cancel()
	if err == nil {
		return nil // the slot's key stays: the slot is done
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	if rerr := in.Locker.Release(rctx, held); rerr != nil {
		return errors.Join(err, fmt.Errorf("%s stays taken until %s: %w", name, end.Format(time.RFC3339), rerr))
	}
	return err
}

// instanceOf returns the instance ID in an owner that Fire made.
func instanceOf(owner string) string {
	id, _, _ := strings.Cut(owner, "/")
	return id
}
