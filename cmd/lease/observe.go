package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/election"
)

const observeSynopsis = `observe [--json] [--once] [--interval D] NAME

Prints the leader of the office NAME (see lease leader): its ID, term
number (the fencing token), metadata and lease owner, or "no leader", as
one line, then one line for each change, until SIGINT or SIGTERM (exit 0).
A renewal is no change; a term older than one printed is never printed.
Changes come from the store's notifications where it has them (memory,
Redis, etcd), else from polling every --interval at most. With --once it
prints the current state and exits: 0, or 3 when nobody leads. With --json
each line is one JSON object: {"office","leader","term","metadata","owner",
"expires"}, with "leader": null and no term when nobody leads.`

// termJSON is how observe prints a term with --json.
type termJSON struct {
	Office   string  `json:"office"`
	Leader   *string `json:"leader"` // null when nobody leads
	Term     uint64  `json:"term,omitempty"`
	Metadata string  `json:"metadata,omitempty"`
	Owner    string  `json:"owner,omitempty"`
	Expires  string  `json:"expires,omitempty"`
}

// observe is "lease observe [--json] [--once] [--interval D] NAME".
func (g *globals) observe(ctx context.Context, args []string) (err error) {
	fs := g.flags("observe", observeSynopsis)
	g.timeoutFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	once := fs.Bool("once", false, "print the current leader and exit (3 when nobody leads)")
	interval := fs.Duration("interval", election.DefaultPollInterval, "read the store at least every `D`")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() != 1 {
		return usageErrorf("observe takes one NAME, got %d arguments", fs.NArg())
	}
	name := fs.Arg(0)
	if err := driver.CheckName(name); err != nil {
		return usageErrorf("observe: %v", err)
	}
	if *interval < time.Millisecond {
		return usageErrorf("observe: --interval %s: the interval must be at least 1ms", *interval)
	}
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker(l, &err)

	if *once {
		octx, cancel := g.oneShot(ctx)
		defer cancel()
		t, err := bounded(octx, func(ctx context.Context) (election.Term, error) { return election.Current(ctx, l, name) }, nil)
		if err != nil {
			return g.storeError(octx, err)
		}
		if err := g.printTerm(t, *asJSON); err != nil {
			return err
		}
		if t.Vacant() {
			return &exitError{code: exitNotHeld}
		}
		return nil
	}

	sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for t, err := range election.Observe(sctx, l, name, election.WithPollInterval(*interval)) {
		if err != nil {
			fmt.Fprintf(g.stderr, "lease: warning: %s (trying again)\n", oneLine(err.Error()))
			continue
		}
		if err := g.printTerm(t, *asJSON); err != nil {
			return err
		}
	}
	return nil
}

// printTerm prints t as one line, or one JSON object.
func (g *globals) printTerm(t election.Term, asJSON bool) error {
	if asJSON {
		v := termJSON{Office: t.Office}
		if !t.Vacant() {
			v.Leader, v.Term, v.Metadata, v.Owner = &t.Leader, t.Number, t.Metadata, t.Owner
			v.Expires = t.Expires.UTC().Format(time.RFC3339Nano)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(g.stdout, "%s\n", b)
		return err
	}
	if t.Vacant() {
		_, err := fmt.Fprintf(g.stdout, "%s: no leader\n", quoteName(t.Office))
		return err
	}
	line := fmt.Sprintf("%s: leader %s, term %d", quoteName(t.Office), t.Leader, t.Number)
	if t.Metadata != "" {
		line += fmt.Sprintf(", metadata %q", t.Metadata)
	}
	_, err := fmt.Fprintf(g.stdout, "%s, owner %q\n", line, t.Owner)
	return err
}
