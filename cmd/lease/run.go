package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

const runSynopsis = `run [flags] NAME -- COMMAND [ARGS...]

Runs COMMAND while holding the lease NAME, renewing it as COMMAND runs and
releasing it when COMMAND exits, whose exit code lease then exits with.
COMMAND gets LEASE_NAME, LEASE_OWNER and LEASE_TOKEN in its environment.

When another owner holds NAME, lease prints who and for how long, and exits
with --conflict-exit-code (75) without running COMMAND. If no renewal has
succeeded by --grace before the lease's deadline (the store is down or
slow), COMMAND's process group gets SIGTERM then, and SIGKILL 100ms before
the deadline (half the grace if that is shorter), so that COMMAND is gone
before the store can give the lease to anyone else; if a renewal finds the
lease lost, SIGTERM comes at once and SIGKILL --grace later, or by the
deadline if that is sooner. Either way lease exits 70. If lease itself dies,
even by SIGKILL, COMMAND's process group is killed with it.

COMMAND runs in a process group of its own. On a terminal it gets the
foreground (Linux): it reads the terminal, Ctrl-C and Ctrl-Z reach it, and
lease stops and continues with it. SIGINT, SIGTERM, SIGHUP, SIGQUIT and
SIGCONT sent to lease are passed on to COMMAND; lease releases the lease
when COMMAND has exited, or --min-hold after acquiring it if that is later:
lease itself keeps running, and renewing, until then.

lease opens the store and asks for the lease within --timeout if given,
else within --ttl; a store that does not answer in time is one line and
exit 1, and so is one that answers only after the lease's deadline: COMMAND
is not started then.`

// runFlags are lease run's options.
type runFlags struct {
	ttl, wait, minHold, renewEvery, grace time.Duration
	owner                                 string
	conflictCode                          int
	verbose                               bool
}

// run is "lease run [flags] NAME -- COMMAND [ARGS...]".
func (g *globals) run(ctx context.Context, args []string) (err error) {
	fs := g.flags("run", runSynopsis)
	var f runFlags
	fs.DurationVar(&f.ttl, "ttl", 30*time.Second, "how long the lease lasts unless renewed: a crashed holder blocks NAME this long")
	fs.DurationVar(&f.wait, "wait", 0, "wait up to `D` for a busy lease instead of giving up at once")
	fs.DurationVar(&f.minHold, "min-hold", 0, "hold the lease at least `D` after acquiring it, even if COMMAND exits sooner: lease keeps running (and renewing) until then (for jobs that cron starts on several machines)")
	fs.DurationVar(&f.renewEvery, "renew-every", 0, "renew the lease every `D` (default a third of --ttl)")
	fs.DurationVar(&f.grace, "grace", 0, "time COMMAND gets between SIGTERM and SIGKILL when the lease cannot be kept; it comes out of the lease: SIGTERM at the deadline minus `D` (default 10s, or a third of --ttl if less)")
	fs.StringVar(&f.owner, "owner", "", "owner identity to acquire as (default a fresh host:pid:random one)")
	fs.IntVar(&f.conflictCode, "conflict-exit-code", exitBusyDflt, "exit code when another owner holds NAME")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "log to stderr what happens to the lease: acquired, each renewal with its slack (how long before the deadline it landed), lost, released (-v)")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up on a store that does not answer within `D` while opening it (default --ttl; each acquire waits at most until the deadline it would grant); 0 waits as long as it takes")
	fs.Lookup("timeout").DefValue = "" // the ttl, unless given
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	args = fs.Args()
	if len(args) == 0 {
		return usageErrorf("run needs NAME and a COMMAND: lease run [flags] NAME -- COMMAND [ARGS...]")
	}
	name, argv := args[0], args[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	} else if len(argv) > 0 && len(argv[0]) > 1 && argv[0][0] == '-' {
		return usageErrorf("run: flags go before NAME (%q came after it); put -- before COMMAND", argv[0])
	}
	if len(argv) == 0 {
		return usageErrorf("run needs a COMMAND after NAME: lease run [flags] %s -- COMMAND [ARGS...]", name)
	}
	if err := f.check(name, g.given); err != nil {
		return err
	}
	var opts []lease.RunOption
	if f.owner != "" {
		opts = append(opts, lease.WithOwner(f.owner))
	}
	if f.renewEvery > 0 {
		opts = append(opts, lease.WithRenewEvery(f.renewEvery))
	}
	if f.wait > 0 {
		opts = append(opts, lease.WithWait(f.wait))
	}
	if f.minHold > 0 {
		opts = append(opts, lease.WithMinHold(f.minHold))
	}
	if f.verbose {
		// Debug: Run logs each renewal that succeeds, with its slack, there.
		opts = append(opts, lease.WithLogger(slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}

	// Without --timeout, the store gets one ttl to open: lease.Run gives
	// each Acquire as long.
	if g.given["timeout"] == "" {
		g.limit, g.limitBy = f.ttl, "the --ttl; set --timeout to change"
	}
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker(l, &err)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	fwd := &forwarder{cancel: cancel}
	stop := fwd.listen()
	defer stop()

	if f.wait > 0 {
		// Say why nothing happens yet: a person may be watching.
		limit, by := g.openLimit()
		ictx, icancel := g.bound(runCtx, limit, by)
		cur, err := bounded(ictx, func(ctx context.Context) (lease.Lease, error) { return l.Inspect(ctx, name) }, nil)
		icancel()
		if err == nil {
			fmt.Fprintf(g.stderr, "lease: %s is held by %s for another %s; waiting up to %s\n",
				quoteName(name), cur.Owner, roundDuration(remaining(cur, time.Now())), f.wait)
		}
	}
	c := &child{argv: argv, grace: f.grace, fwd: fwd, g: g, conflictCode: f.conflictCode}
	rerr := lease.Run(runCtx, l, name, f.ttl, c.run, opts...)
	return c.outcome(name, rerr)
}

// openLimit is how long lease waits for the store to open: --timeout, or
// the limit lease run set.
func (g *globals) openLimit() (time.Duration, string) {
	if g.limitBy != "" {
		return g.limit, g.limitBy
	}
	return g.timeout, "--timeout"
}

// check validates the flags, before anything touches the store, and
// fills in the default grace.
func (f *runFlags) check(name string, given map[string]string) error {
	if err := driver.CheckName(name); err != nil {
		return usageErrorf("run: %v", err)
	}
	if err := driver.CheckTTL(f.ttl); err != nil {
		return usageErrorf("run: --ttl: %v", err)
	}
	if f.owner != "" {
		if err := driver.CheckOwner(f.owner); err != nil {
			return usageErrorf("run: --owner: %v", err)
		}
	}
	switch {
	case f.wait < 0 || f.minHold < 0 || f.renewEvery < 0 || f.grace < 0:
		return usageErrorf("run: durations must not be negative")
	case f.renewEvery >= f.ttl:
		return usageErrorf("run: --renew-every %s must be shorter than --ttl %s", f.renewEvery, f.ttl)
	case f.conflictCode < 0 || f.conflictCode > 255:
		return usageErrorf("run: --conflict-exit-code %d is not between 0 and 255", f.conflictCode)
	}
	// The grace comes out of the lease: SIGTERM at the Deadline minus the
	// grace. That moment must come after the first renewal is due (and
	// the Deadline comes DriftMargin before the ttl ends), or COMMAND
	// would be stopped before lease even tried to renew.
	every := f.renewEvery
	if every == 0 {
		every = f.ttl / 3
	}
	room := f.ttl - lease.DriftMargin(f.ttl) - every
	if given["grace"] == "" {
		f.grace = min(10*time.Second, f.ttl/3)
		if f.grace >= room {
			f.grace = max(room/2, 0)
		}
		return nil
	}
	if f.grace > 0 && f.grace >= room {
		return usageErrorf("run: --grace %s does not fit in --ttl %s: SIGTERM comes at the lease's deadline minus the grace, which must be after the first renewal (due after %s); use a --grace under %s, or a longer --ttl",
			f.grace, f.ttl, every, max(room, 0).Round(time.Millisecond))
	}
	return nil
}

// child runs the command under the lease.
type child struct {
	argv  []string
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

	mu   sync.Mutex
	grp  *group    // running command, nil before and after
	sig  os.Signal // first signal received before the command started
	done bool      // the command has exited
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
