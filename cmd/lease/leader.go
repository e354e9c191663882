package main

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
)

const leaderSynopsis = `leader [flags] NAME -- COMMAND [ARGS...]

Campaigns for the office NAME (package election) and, once elected, runs
COMMAND for one term: lease renews the office's lease while COMMAND runs,
resigns when it exits, and exits with its code, for a supervisor to start
it again as a candidate. While another candidate leads, lease stands by
(woken by the store where it notifies releases, else polling), up to
--timeout if given, then exits 75 without running COMMAND.

COMMAND gets LEASE_NAME, LEASE_OWNER and LEASE_TOKEN as under lease run,
and LEASE_TERM (the term number: the fencing token, LEASE_TOKEN) and
LEASE_LEADER (the --id). It runs in a process group of its own, gets the
signals lease gets, and is stopped as under lease run when the lease
cannot be kept: SIGTERM, SIGKILL before the deadline, and exit 70.

SIGTERM or SIGINT while leading goes to COMMAND; lease waits for it to
exit (at most --grace past the signal's effect and never past the lease's
deadline), and only then resigns, so the next leader never overlaps it.
SIGTERM or SIGINT while standing by exits 0 without running COMMAND.`

// leaderFlags are lease leader's options.
type leaderFlags struct {
	ttl, grace, standby time.Duration
	id, meta            string
	verbose             bool
}

// leader is "lease leader [flags] NAME -- COMMAND [ARGS...]".
func (g *globals) leader(ctx context.Context, args []string) (err error) {
	fs := g.newFlagSet("lease leader", leaderSynopsis, false)
	fs.StringVar(&g.backend, "backend", g.backend, backendUsage)
	var f leaderFlags
	fs.DurationVar(&f.ttl, "ttl", election.DefaultTTL, "the leader's lease ttl, renewed every third of it: a crashed leader keeps the office from the others this long")
	fs.DurationVar(&f.grace, "grace", 0, "time COMMAND gets between SIGTERM and SIGKILL when the lease cannot be kept; SIGTERM at the deadline minus `D` (default 10s, or a third of --ttl if less)")
	fs.StringVar(&f.id, "id", "", "the candidate's ID, which observers see as the leader (default hostname:pid)")
	fs.StringVar(&f.meta, "meta", "", "metadata the leader publishes to observers with its term: the address it serves on, say")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "log to stderr what happens to the candidacy and its lease (-v)")
	fs.DurationVar(&f.standby, "timeout", 0, "give up standing by after `D` and exit 75 without running COMMAND (default: stand by until elected)")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	args = fs.Args()
	if len(args) == 0 {
		return usageErrorf("leader needs NAME and a COMMAND: lease leader [flags] NAME -- COMMAND [ARGS...]")
	}
	name, argv := args[0], args[1:]
	switch {
	case len(argv) > 0 && argv[0] == "--":
		argv = argv[1:]
	case len(argv) > 0 && len(argv[0]) > 1 && argv[0][0] == '-':
		return usageErrorf("leader: flags go before NAME (%q came after it); put -- before COMMAND", argv[0])
	case len(argv) > 0:
		return usageErrorf("leader: put -- between NAME and COMMAND: lease leader [flags] %s -- %s", name, strings.Join(argv, " "))
	}
	if len(argv) == 0 {
		return usageErrorf("leader needs a COMMAND after NAME: lease leader [flags] %s -- COMMAND [ARGS...]", name)
	}
	// The ttl, grace and name rules are lease run's.
	rf := runFlags{ttl: f.ttl, grace: f.grace, conflictCode: exitBusyDflt}
	if err := rf.check(name, g.given); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			ee.msg = "leader: " + strings.TrimPrefix(ee.msg, "run: ")
		}
		return err
	}
	if f.standby < 0 {
		return usageErrorf("leader: durations must not be negative")
	}
	f.grace = rf.grace

	// The store gets one ttl to open, as under lease run; --timeout is
	// the stand-by's limit here.
	g.limit, g.limitBy = f.ttl, "the --ttl"
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker(l, &err)

	opts := []election.Option{election.WithTTL(f.ttl), election.WithMetadata(f.meta)}
	if f.id != "" {
		opts = append(opts, election.WithID(f.id))
	}
	if f.verbose {
		opts = append(opts, election.WithLogger(slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	cand, err := election.NewCandidate(l, name, opts...)
	if err != nil {
		if errors.Is(err, lease.ErrInvalid) {
			return usageErrorf("leader: %v", oneLine(err.Error()))
		}
		return err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	fwd := &forwarder{cancel: cancel}
	stop := fwd.listen()
	defer stop()
	if f.standby > 0 {
		t := time.AfterFunc(f.standby, func() { fwd.giveUp() })
		defer t.Stop()
	}

	c := &child{argv: argv, grace: f.grace, fwd: fwd, g: g, conflictCode: exitBusyDflt}
	lerr := cand.Lead(runCtx, func(ctx context.Context, t election.Term) error {
		c.env = []string{"LEASE_TERM=" + strconv.FormatUint(t.Number, 10), "LEASE_LEADER=" + t.Leader}
		return c.run(ctx)
	})
	switch {
	case c.started:
	case fwd.interrupted() != nil:
		return nil // stood by, and was told to stop
	case fwd.expired():
		cur, cerr := election.Current(ctx, l, name)
		if cerr == nil && !cur.Vacant() {
			return failf(exitBusyDflt, "gave up standing by for %s after %s: led by %s (term %d)", quoteName(name), f.standby, cur.Leader, cur.Number)
		}
		return failf(exitBusyDflt, "gave up standing by for %s after %s", quoteName(name), f.standby)
	}
	return c.outcome(name, lerr)
}
