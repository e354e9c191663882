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
	"github.com/leasekit/lease/driver"
)

const runSynopsis = `run [flags] NAME -- COMMAND [ARGS...]

Runs COMMAND while holding the lease NAME, renewing it as COMMAND runs and
releasing it when COMMAND exits, whose exit code lease then exits with.
COMMAND gets LEASE_NAME, LEASE_OWNER and LEASE_TOKEN in its environment.

When another owner holds NAME, lease prints who and for how long, and exits
with --conflict-exit-code (75) without running COMMAND. If the lease is lost
while COMMAND runs, COMMAND's process group gets SIGTERM and, --grace later,
SIGKILL, and lease exits 70. SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed
on to COMMAND; lease releases the lease when COMMAND has exited.`

// runFlags are lease run's options.
type runFlags struct {
	ttl, wait, minHold, renewEvery, grace time.Duration
	owner                                 string
	conflictCode                          int
}

// run is "lease run [flags] NAME -- COMMAND [ARGS...]".
func (g *globals) run(ctx context.Context, args []string) (err error) {
	fs := g.flags("run", runSynopsis)
	var f runFlags
	fs.DurationVar(&f.ttl, "ttl", 30*time.Second, "how long the lease lasts unless renewed: a crashed holder blocks NAME this long")
	fs.DurationVar(&f.wait, "wait", 0, "wait up to this long for a busy lease instead of giving up at once")
	fs.DurationVar(&f.minHold, "min-hold", 0, "hold the lease at least this long, even if COMMAND finishes sooner (for jobs that cron starts on several machines)")
	fs.DurationVar(&f.renewEvery, "renew-every", 0, "renew the lease this often (default ttl/3)")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after the lease is lost, time between SIGTERM and SIGKILL")
	fs.StringVar(&f.owner, "owner", "", "owner identity to acquire as (default a fresh host:pid:random one)")
	fs.IntVar(&f.conflictCode, "conflict-exit-code", exitBusyDflt, "exit code when another owner holds NAME")
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
	if err := f.check(name); err != nil {
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
		if cur, err := l.Inspect(runCtx, name); err == nil {
			fmt.Fprintf(g.stderr, "lease: %s is held by %s for another %s; waiting up to %s\n",
				quoteName(name), cur.Owner, roundDuration(remaining(cur, time.Now())), f.wait)
		}
	}
	c := &child{argv: argv, grace: f.grace, fwd: fwd, g: g, conflictCode: f.conflictCode}
	rerr := lease.Run(runCtx, l, name, f.ttl, c.run, opts...)
	return c.outcome(name, rerr)
}

// check validates the flags, before anything touches the store.
func (f *runFlags) check(name string) error {
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
	lost    bool // the lease was lost while it ran: it was stopped

	startErr     error // the command could not be started
	conflictCode int   // exit code for a busy lease
}

// run is lease.Run's fn: it runs the command to its end, stopping it if
// ctx ends because the lease was lost.
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
	newProcessGroup(cmd)
	if err := c.fwd.start(cmd); err != nil {
		c.startErr = err
		return err
	}
	c.started = true
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	select {
	case <-done:
	case <-ctx.Done():
		// Lost: stop the whole group, giving it the grace period to
		// finish cleanly, and then kill whatever is left of it.
		c.lost = true
		signalGroup(cmd, terminate)
		t := time.NewTimer(c.grace)
		select {
		case <-done:
			t.Stop()
			killGroup(cmd) // its children, if any are left
		case <-t.C:
			killGroup(cmd)
			<-done
		}
	}
	c.fwd.stopped()
	c.code = exitCode(cmd.ProcessState)
	return nil
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
	case c.startErr != nil && !errors.Is(err, lease.ErrLost):
		code := 126 // as a shell says: found but cannot run
		if errors.Is(c.startErr, exec.ErrNotFound) || errors.Is(c.startErr, os.ErrNotExist) {
			code = 127
		}
		return failf(code, "cannot run %s: %v", c.argv[0], c.startErr)
	case errors.Is(err, lease.ErrLost) && c.lost:
		return failf(exitLost, "lost the lease %s while the command ran, so it was stopped: %v", quoteName(name), err)
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
// runs; before that, a signal cancels the wait for the lease.
type forwarder struct {
	cancel context.CancelFunc

	mu   sync.Mutex
	cmd  *exec.Cmd // running command, nil before and after
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
	case f.cmd != nil:
		signalGroup(f.cmd, sig)
	case !f.done && f.sig == nil:
		f.sig = sig
		f.cancel()
	}
}

// start starts cmd unless a signal came first.
func (f *forwarder) start(cmd *exec.Cmd) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sig != nil {
		return fmt.Errorf("interrupted by %v before the command started", f.sig)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	f.cmd = cmd
	return nil
}

// stopped records that the command has exited: signals are no longer
// forwarded to its (possibly reused) process group.
func (f *forwarder) stopped() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmd = nil
	f.done = true
}

func (f *forwarder) interrupted() os.Signal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sig
}
