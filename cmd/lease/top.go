package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/leasekit/lease"
)

const topSynopsis = `top [--json] [--interval D] [--count N] [PREFIX]

lease list --watch: lists the held leases whose names start with PREFIX
every --interval (1s), with each one's time left as a bar, until
interrupted or --count lists have been shown. On a terminal each list
replaces the last; otherwise the lists follow one another, each after a
line with the time and how many leases are held.`

// top is "lease top [flags] [PREFIX]", lease list --watch.
func (g *globals) top(ctx context.Context, args []string) error {
	return g.listCommand(ctx, "top", topSynopsis, args, true)
}

// clearScreen moves a terminal's cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

// barWidth is how many characters a time-left bar has inside its
// brackets.
const barWidth = 10

// watchList lists prefix every f.interval until ctx ends, lease is
// interrupted (SIGINT, SIGTERM: exit 0), or f.count lists have been shown.
// A list that fails is reported on stderr and the next one tried; the
// exit is 1 when the last one failed.
func (g *globals) watchList(ctx context.Context, prefix string, f listFlags) (err error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lister, closeL, err := g.openLister(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while opening
		}
		return err
	}
	defer closeL(&err)
	tty := isTerminal(g.stdout)
	bars := &barScales{}
	var last error
	for n := 0; f.count == 0 || n < f.count; n++ {
		if n > 0 {
			t := time.NewTimer(f.interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return last
			case <-t.C:
			}
		}
		octx, cancel := g.oneShot(ctx)
		leases, lerr := bounded(octx, func(ctx context.Context) ([]lease.Lease, error) { return lister.List(ctx, prefix) }, nil)
		if lerr != nil {
			lerr = g.storeError(octx, lerr)
		}
		cancel()
		if ctx.Err() != nil {
			return last // interrupted: not a failure
		}
		last = lerr
		if lerr != nil {
			fmt.Fprintf(g.stderr, "lease: %s\n", oneLine(lerr.Error()))
			continue
		}
		now := time.Now()
		bars.keep(leases, now)
		var frame bytes.Buffer
		if f.json {
			b, err := json.Marshal(listJSON(leases, now))
			if err != nil {
				return err
			}
			frame.Write(append(b, '\n'))
		} else {
			if tty {
				frame.WriteString(clearScreen)
			} else if n > 0 {
				frame.WriteByte('\n')
			}
			fmt.Fprintf(&frame, "%s  %s\n", now.Format("15:04:05"), heldCount(len(leases), prefix))
			if len(leases) > 0 {
				if err := writeTable(&frame, prefix, leases, now, bars); err != nil {
					return err
				}
			}
		}
		if _, err := g.stdout.Write(frame.Bytes()); err != nil {
			return err
		}
	}
	return last
}

// heldCount says how many leases are held, for a watch's header line.
func heldCount(n int, prefix string) string {
	what := "leases"
	if n == 1 {
		what = "lease"
	}
	if prefix != "" {
		return fmt.Sprintf("%d %s held whose names start with %q", n, what, prefix)
	}
	return fmt.Sprintf("%d %s held", n, what)
}

// barScales remembers, for each tenure a watch shows, the longest time
// left it has seen: the ttl, once a renewal has been seen (or the tenure
// was first seen as it began), and until then the time left when it was
// first seen. Stores report no ttl, so that is the best scale a watcher
// has.
type barScales struct {
	longest map[tenureKey]time.Duration
}

type tenureKey struct {
	name  string
	token uint64
}

// keep records the time left of each of leases and forgets the tenures
// that are no longer listed.
func (b *barScales) keep(leases []lease.Lease, now time.Time) {
	next := make(map[tenureKey]time.Duration, len(leases))
	for _, ls := range leases {
		k := tenureKey{ls.Name, ls.Token}
		next[k] = max(b.longest[k], remaining(ls, now))
	}
	b.longest = next
}

// scale is the bar's full length for ls with left to go.
func (b *barScales) scale(ls lease.Lease, left time.Duration) time.Duration {
	return max(b.longest[tenureKey{ls.Name, ls.Token}], left)
}

// bar draws left out of full as width characters between brackets:
// "[######    ]". A tenure with any time left has at least one mark.
func bar(left, full time.Duration, width int) string {
	n := 0
	if full > 0 && left > 0 {
		n = int((int64(left)*int64(width) + int64(full)/2) / int64(full))
		n = min(max(n, 1), width)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(" ", width-n) + "]"
}

// isTerminal reports whether w is a terminal (a character device), where
// a watch clears the screen before each list.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
