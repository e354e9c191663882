package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasekit/lease"
)

const listSynopsis = `list [--json] [--watch [--interval D] [--count N]] [PREFIX]

Lists the held leases whose names start with PREFIX (all of them without
one): name, owner, token, when the tenure began (ACQUIRED, by the store's
clock; "-" when the store does not record it, as on etcd) and the time
left. With --watch (or as lease top) it lists them again every --interval,
with the time left also as a bar, until interrupted or --count lists have
been shown; on a terminal each list replaces the last.`

// listFlags are lease list's options.
type listFlags struct {
	json     bool
	watch    bool
	interval time.Duration
	count    int
}

// list is "lease list [--json] [--watch ...] [PREFIX]".
func (g *globals) list(ctx context.Context, args []string) error {
	return g.listCommand(ctx, "list", listSynopsis, args, false)
}

// listCommand is lease list, and lease top when watch is set.
func (g *globals) listCommand(ctx context.Context, cmd, synopsis string, args []string, watch bool) (err error) {
	fs := g.flags(cmd, synopsis)
	g.timeoutFlag(fs)
	f := listFlags{watch: watch}
	with := "with --watch, "
	if watch {
		with = ""
	}
	fs.BoolVar(&f.json, "json", false, "print a JSON array ("+with+"one per line per list)")
	if !watch {
		fs.BoolVar(&f.watch, "watch", false, "list again every --interval until interrupted (lease top)")
	}
	fs.DurationVar(&f.interval, "interval", time.Second, with+"list again every `D`")
	fs.IntVar(&f.count, "count", 0, with+"stop after `N` lists (0: until interrupted)")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 1 {
		return usageErrorf("%s takes at most one PREFIX, got %d arguments", cmd, fs.NArg())
	}
	switch {
	case f.interval <= 0:
		return usageErrorf("%s: --interval must be positive, got %s", cmd, f.interval)
	case f.count < 0:
		return usageErrorf("%s: --count must not be negative, got %d", cmd, f.count)
	case !f.watch && (strings.HasPrefix(g.given["interval"], "--") || strings.HasPrefix(g.given["count"], "--")):
		return usageErrorf("%s: --interval and --count go with --watch", cmd)
	}
	prefix := fs.Arg(0)
	if f.watch {
		return g.watchList(ctx, prefix, f)
	}
	ctx, cancel := g.oneShot(ctx)
	defer cancel()
	lister, closeL, err := g.openLister(ctx)
	if err != nil {
		return err
	}
	defer closeL(&err)
	leases, err := bounded(ctx, func(ctx context.Context) ([]lease.Lease, error) { return lister.List(ctx, prefix) }, nil)
	if err != nil {
		return g.storeError(ctx, err)
	}
	now := time.Now()
	if f.json {
		return writeJSON(g.stdout, listJSON(leases, now))
	}
	return writeTable(g.stdout, prefix, leases, now, nil)
}

// openLister opens the store and checks that it can list.
func (g *globals) openLister(ctx context.Context) (lease.Lister, func(*error), error) {
	l, err := g.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	closeL := func(err *error) { closeLocker(l, err) }
	lister, ok := l.(lease.Lister)
	ok = ok && lease.Can[lease.Lister](l)
	if !ok {
		var cerr error
		closeL(&cerr)
		return nil, nil, failf(exitFailure, "this backend (%T) cannot list leases: it does not implement lease.Lister; use lease status NAME", l)
	}
	return lister, closeL, nil
}

func listJSON(leases []lease.Lease, now time.Time) []leaseJSON {
	out := make([]leaseJSON, 0, len(leases))
	for _, ls := range leases {
		out = append(out, toJSON(ls, now))
	}
	return out
}

// writeTable prints leases as a table, or says that none are held. With
// bars (lease list --watch), each line ends with its time left as a bar.
func writeTable(w io.Writer, prefix string, leases []lease.Lease, now time.Time, bars *barScales) error {
	if len(leases) == 0 {
		if prefix == "" {
			fmt.Fprintln(w, "no leases are held")
		} else {
			fmt.Fprintf(w, "no leases whose names start with %q are held\n", prefix)
		}
		return nil
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tOWNER\tTOKEN\tACQUIRED\tLEFT")
	if bars != nil {
		fmt.Fprint(tw, "\t") // the bars' column has no heading
	}
	fmt.Fprintln(tw)
	for _, ls := range leases {
		left := remaining(ls, now)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s", quoteName(ls.Name), ls.Owner, ls.Token, acquiredText(ls), roundDuration(left))
		if bars != nil {
			fmt.Fprintf(tw, "\t%s", bar(left, bars.scale(ls, left), barWidth))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Without the padding tabwriter leaves at the ends of lines (the
	// heading's, before the bars' column).
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
}
