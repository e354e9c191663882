package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// The child-process machinery shared by lease run and lease leader: the
// command in its own process group, signals passed on to it, and stopping
// it (SIGTERM, then SIGKILL) before the lease can go to anyone else.

// child runs the command under the lease.
type child struct {
	argv  []string
	env   []string // added to the command's environment, after LEASE_NAME, LEASE_OWNER and LEASE_TOKEN
	grace time.Duration
	fwd   *forwarder
	g     *globals

	started bool // the command ran; code is its exit status
	code    int
	lost    bool   // the command was stopped because the lease could not be kept
	byGrace bool   // ... because no renewal succeeded by the Deadline minus the grace
	why     string // what stopped it

	notStarted   error // the lease's Deadline passed, or it was lost, before the command could start
	startErr     error // the command could not be started
	conflictCode int   // exit code for a busy lease
}

// errTooLate says the lease's Deadline had passed when the command was
// about to start.
var errTooLate = errors.New("the lease's deadline had passed before the command could start")

// run is lease.Run's fn: it runs the command to its end, stopping it if
// the lease cannot be kept.
func (c *child) run(ctx context.Context) error {
	held, _ := lease.FromContext(ctx)
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = c.g.stdout
	cmd.Stderr = c.g.stderr
	cmd.Env = append(os.Environ(),
		"LEASE_NAME="+held.Name,
		"LEASE_OWNER="+held.Owner,
		"LEASE_TOKEN="+strconv.FormatUint(held.Token, 10),
	)
	cmd.Env = append(cmd.Env, c.env...)
	grp, err := c.fwd.start(ctx, cmd)
	var ns *notStartedError
	switch {
	case errors.As(err, &ns):
		c.notStarted = ns.err
		return err
	case err != nil:
		c.startErr = err
		return err
	}
	c.started = true
	c.supervise(ctx, grp)
	grp.finish()
	c.fwd.stopped()
	c.code = exitCode(cmd.ProcessState)
	return nil
}

// killLead is how long before the Deadline SIGKILL comes, so that the
// command is gone by then: 100ms, or half the grace if that is shorter.
func (c *child) killLead() time.Duration { return min(c.grace/2, 100*time.Millisecond) }

// supervise waits for the command to exit. When no renewal has succeeded
// by the Deadline minus the grace, or the lease is lost, it stops the
// command's group: SIGTERM, then SIGKILL.
func (c *child) supervise(ctx context.Context, grp *group) {
	for {
		cur, _ := lease.FromContext(ctx)
		t := time.NewTimer(time.Until(cur.Deadline.Add(-c.grace)))
		select {
		case <-grp.done:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			cur, _ = lease.FromContext(ctx)
			c.why = context.Cause(ctx).Error()
			killAt := time.Now().Add(c.grace)
			if byDeadline := cur.Deadline.Add(-c.killLead()); byDeadline.Before(killAt) {
				killAt = byDeadline
			}
			c.stop(grp, killAt)
			return
		case <-t.C:
			if now, _ := lease.FromContext(ctx); now.Deadline.After(cur.Deadline) {
				continue // renewed: wait for the next deadline
			}
			c.byGrace = true
			c.stop(grp, cur.Deadline.Add(-c.killLead()))
			return
		}
	}
}

// stop sends the command's group SIGTERM, and SIGKILL at killAt if the
// command has not exited by then (and to what it leaves behind if it
// has), and waits for the command.
func (c *child) stop(grp *group, killAt time.Time) {
	c.lost = true
	grp.signal(terminate)
	t := time.NewTimer(time.Until(killAt))
	defer t.Stop()
	select {
	case <-grp.done:
		grp.kill() // its children, if any are left
	case <-t.C:
		grp.kill()
		<-grp.done
	}
}

// outcome turns what lease.Run returned into lease's exit.
func (c *child) outcome(name string, err error) error {
	var he *lease.HeldError
	switch {
	case c.fwd.interrupted() != nil && !c.started:
		// Before the busy case: a wait cut short by a signal also carries
		// the holder it was waiting for.
		return failf(signalExitCode(c.fwd.interrupted()), "interrupted before the command started (waiting for %s)", quoteName(name))
	case errors.As(err, &he):
		return failf(c.conflictCode, "%s is busy: held by %s for another %s", quoteName(name), he.Owner, roundDuration(he.Remaining))
	case errors.Is(c.notStarted, errTooLate):
		return failf(exitFailure, "the store answered too late: the lease %s reached its deadline before %s could start, so it was not run and the lease was released", quoteName(name), c.argv[0])
	case c.notStarted != nil:
		return failf(exitFailure, "the lease %s was lost before %s could start, so it was not run: %v", quoteName(name), c.argv[0], c.notStarted)
	case c.startErr != nil && !errors.Is(err, lease.ErrLost):
		code := 126 // as a shell says: found but cannot run
		if errors.Is(c.startErr, exec.ErrNotFound) || errors.Is(c.startErr, os.ErrNotExist) {
			code = 127
		}
		return failf(code, "cannot run %s: %v", c.argv[0], c.startErr)
	case c.byGrace:
		return failf(exitLost, "could not renew the lease %s in time: no renewal had succeeded %s before its deadline, so the command was stopped (SIGTERM, then SIGKILL before the deadline)", quoteName(name), c.grace)
	case c.lost && errors.Is(err, lease.ErrLost):
		return failf(exitLost, "lost the lease %s while the command ran, so it was stopped: %v", quoteName(name), err)
	case c.lost:
		return failf(exitLost, "lost the lease %s while the command ran, so it was stopped: %s", quoteName(name), c.why)
	case errors.Is(err, lease.ErrLost):
		return failf(exitLost, "lost the lease %s before the command finished (exit status %d); another holder may have run at the same time: %v", quoteName(name), c.code, err)
	case err != nil && c.started:
		// The command ran to its end; only the release failed.
		fmt.Fprintf(c.g.stderr, "lease: warning: %s\n", oneLine(err.Error()))
		return &exitError{code: c.code}
	case err != nil:
		return err
	}
	return &exitError{code: c.code}
}

// forwarder passes the signals lease receives on to the command once it
// runs; before that, a signal (but SIGCONT) cancels the wait for the
// lease.
type forwarder struct {
	cancel context.CancelFunc

	mu  sync.Mutex
	grp *group    // running command, nil before and after
	sig os.Signal // first signal received before the command started
	// gaveUp: lease leader's --timeout ended the stand-by before the
	// command started.
	gaveUp bool
	done   bool // the command has exited
}

// listen starts forwarding; the returned func stops it.
func (f *forwarder) listen() (stop func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, forwardedSignals...)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case sig := <-ch:
				f.deliver(sig)
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
		wg.Wait()
	}
}

func (f *forwarder) deliver(sig os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.grp != nil:
		f.grp.signal(sig)
	case isContinue(sig):
	case !f.done && f.sig == nil:
		f.sig = sig
		f.cancel()
	}
}

// notStartedError is why start did not start the command although it could
// have: the lease could no longer be trusted.
type notStartedError struct{ err error }

func (e *notStartedError) Error() string { return e.err.Error() }

// start starts cmd, unless a signal came first or the lease (held in ctx)
// is past its Deadline or lost: checked last thing before the start.
func (f *forwarder) start(ctx context.Context, cmd *exec.Cmd) (*group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sig != nil {
		return nil, fmt.Errorf("interrupted by %v before the command started", f.sig)
	}
	if f.gaveUp {
		return nil, errors.New("gave up standing by before the command started")
	}
	held, _ := lease.FromContext(ctx)
	if !time.Now().Before(held.Deadline) {
		return nil, &notStartedError{errTooLate}
	}
	if ctx.Err() != nil {
		return nil, &notStartedError{context.Cause(ctx)}
	}
	grp, err := startGroup(cmd)
	if err != nil {
		return nil, err
	}
	f.grp = grp
	return grp, nil
}

// stopped records that the command has exited: signals are no longer
// forwarded to its (possibly reused) process group.
func (f *forwarder) stopped() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grp = nil
	f.done = true
}

func (f *forwarder) interrupted() os.Signal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sig
}

// giveUp ends a wait for the lease that has not started the command yet,
// as a signal would, and reports whether it did: false once the command
// has started (it then runs its term), or after a signal came.
func (f *forwarder) giveUp() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.grp != nil || f.done || f.sig != nil {
		return false
	}
	f.gaveUp = true
	f.cancel()
	return true
}

func (f *forwarder) expired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gaveUp
}
