package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/semaphore"
)

const runSynopsis = `run [flags] NAME -- COMMAND [ARGS...]

Runs COMMAND while holding the lease NAME, renewing it as COMMAND runs and
releasing it when COMMAND exits, whose exit code lease then exits with.
COMMAND gets LEASE_NAME, LEASE_OWNER and LEASE_TOKEN in its environment.

With --slots N, NAME is a semaphore: COMMAND runs while holding one of its
N slots, so that at most N run at once. Slot I is the lease
lease.semaphore/NAME#I; COMMAND also gets LEASE_SLOT (I), and LEASE_NAME
and LEASE_TOKEN are its slot's (tokens increase per slot). A caller with
a smaller N than the holders' takes only slots below its own N.

When another owner holds NAME (every slot, with --slots), lease prints who
and for how long, and exits with --conflict-exit-code (75) without running
COMMAND. If no renewal has succeeded by --grace before the lease's
deadline (the store is down or slow), COMMAND's process group gets SIGTERM
then, and SIGKILL 100ms before the deadline (half the grace if that is
shorter), so that COMMAND is gone before the store can give the lease to
anyone else; if a renewal finds the lease lost, SIGTERM comes at once and
SIGKILL --grace later, or by the deadline if that is sooner. Either way
lease exits 70. If lease itself dies, even by SIGKILL, COMMAND's process
group is killed with it.

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
	slots                                 int
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
	fs.IntVar(&f.slots, "slots", 0, "treat NAME as a semaphore of `N` slots: run COMMAND in a free slot, at most N at once (LEASE_SLOT gives the slot)")
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

	if f.slots > 0 {
		return g.runSlot(runCtx, l, name, f, argv, fwd)
	}
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

// runSlot is lease run --slots: COMMAND in one of NAME's slots.
func (g *globals) runSlot(ctx context.Context, l lease.Locker, name string, f runFlags, argv []string, fwd *forwarder) error {
	var opts []semaphore.Option
	if f.owner != "" {
		opts = append(opts, semaphore.WithOwner(f.owner))
	}
	if f.renewEvery > 0 {
		opts = append(opts, semaphore.WithRenewEvery(f.renewEvery))
	}
	if f.wait > 0 {
		opts = append(opts, semaphore.WithWait(f.wait))
	}
	if f.minHold > 0 {
		opts = append(opts, semaphore.WithMinHold(f.minHold))
	}
	if f.verbose {
		opts = append(opts, semaphore.WithLogger(slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	c := &child{argv: argv, grace: f.grace, fwd: fwd, g: g, conflictCode: f.conflictCode}
	err := semaphore.Run(ctx, l, name, f.slots, f.ttl, func(ctx context.Context, s semaphore.Slot) error {
		c.env = append(c.env, "LEASE_SLOT="+strconv.Itoa(s.Index))
		return c.run(ctx)
	}, opts...)
	var full *semaphore.FullError
	if errors.As(err, &full) && !c.started && c.fwd.interrupted() == nil {
		return failf(c.conflictCode, "%s is busy: all %d slots are held; the first ends in at most %s", quoteName(name), full.N, roundDuration(full.Remaining))
	}
	return c.outcome(name, err)
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
	switch {
	case f.slots < 0 || f.slots > semaphore.MaxSlots:
		return usageErrorf("run: --slots %d: want 1 to %d slots (or 0, the default, for a plain lease)", f.slots, semaphore.MaxSlots)
	case f.slots == 0 && strings.HasPrefix(name, semaphore.Prefix):
		return usageErrorf("run: names beginning with %s are reserved for the slots of semaphores; to hold a slot, run with --slots N and the semaphore's name", semaphore.Prefix)
	case f.slots > 0:
		if extra := len(semaphore.SlotName(name, f.slots-1)) - len(name); len(name)+extra > lease.MaxNameLen {
			return usageErrorf("run: --slots %d: NAME is %d bytes, and its slot names add %d (%s, '#' and the slot): a lease name has at most %d bytes", f.slots, len(name), extra, semaphore.Prefix, lease.MaxNameLen)
		}
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
