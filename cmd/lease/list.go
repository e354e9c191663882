package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/leasekit/lease"
)

// list is "lease list [--json] [PREFIX]".
func (g *globals) list(ctx context.Context, args []string) (err error) {
	fs := g.flags("list", "list [--json] [PREFIX]\n\nLists the held leases whose names start with PREFIX (all of them without one).")
	g.timeoutFlag(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 1 {
		return usageErrorf("list takes at most one PREFIX, got %d arguments", fs.NArg())
	}
	prefix := fs.Arg(0)
	ctx, cancel := g.oneShot(ctx)
	defer cancel()
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker(l, &err)
	lister, ok := l.(lease.Lister)
	if !ok {
		return failf(exitFailure, "this backend (%T) cannot list leases: it does not implement lease.Lister; use lease status NAME", l)
	}
	leases, err := bounded(ctx, func(ctx context.Context) ([]lease.Lease, error) { return lister.List(ctx, prefix) }, nil)
	if err != nil {
		return g.storeError(ctx, err)
	}
	now := time.Now()
	if *asJSON {
		out := make([]leaseJSON, 0, len(leases))
		for _, ls := range leases {
			out = append(out, toJSON(ls, now))
		}
		return writeJSON(g.stdout, out)
	}
	if len(leases) == 0 {
		if prefix == "" {
			fmt.Fprintln(g.stdout, "no leases are held")
		} else {
			fmt.Fprintf(g.stdout, "no leases whose names start with %q are held\n", prefix)
		}
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tTOKEN\tLEFT")
	for _, ls := range leases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", quoteName(ls.Name), ls.Owner, ls.Token, roundDuration(remaining(ls, now)))
	}
	return tw.Flush()
}
