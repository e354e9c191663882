package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/semaphore"
)

// leaseJSON is how status and list print a tenure with --json.
type leaseJSON struct {
	Name  string `json:"name"`
	Held  bool   `json:"held"`
	Owner string `json:"owner,omitempty"`
	Token uint64 `json:"token,omitempty"`
	// Acquired is when the tenure began by the store's clock, RFC 3339;
	// absent when the store does not record it (etcd).
	Acquired string `json:"acquired,omitempty"`
	// Expires is the store's expiry time, RFC 3339.
	Expires string `json:"expires,omitempty"`
	// RemainingMS is Expires minus this machine's clock, in milliseconds.
	RemainingMS int64 `json:"remaining_ms,omitempty"`
}

func toJSON(l lease.Lease, now time.Time) leaseJSON {
	v := leaseJSON{
		Name:        l.Name,
		Held:        true,
		Owner:       l.Owner,
		Token:       l.Token,
		Expires:     l.Expires.UTC().Format(time.RFC3339Nano),
		RemainingMS: remaining(l, now).Milliseconds(),
	}
	if !l.Acquired.IsZero() {
		v.Acquired = l.Acquired.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// acquiredText shows when l's tenure began, by this machine's time zone,
// to the second, or "-" when the store does not record it.
func acquiredText(l lease.Lease) string {
	if l.Acquired.IsZero() {
		return "-"
	}
	return l.Acquired.Local().Format(time.RFC3339)
}

// heldFor is how long l's tenure has lasted, reading Acquired (the
// store's clock) against this machine's clock, or 0 when it is unknown.
func heldFor(l lease.Lease, now time.Time) time.Duration {
	if l.Acquired.IsZero() || now.Before(l.Acquired) {
		return 0
	}
	return now.Sub(l.Acquired)
}

// remaining is how long l has left, reading Expires (the store's clock)
// against this machine's clock: good enough for people.
func remaining(l lease.Lease, now time.Time) time.Duration {
	d := l.Expires.Sub(now)
	if d < 0 {
		d = 0
	}
	return d
}

// status is "lease status [--json] NAME".
func (g *globals) status(ctx context.Context, args []string) (err error) {
	fs := g.flags("status", "status [--json] [--slots N] NAME\n\nShows who holds NAME, its token, when its tenure began (\"-\" when the store does not record it, as on etcd) and how long it has left. Exits 3 when nobody holds it.\n\nWith --slots N, NAME is a semaphore (lease run --slots): shows the holder of each held slot, those above N included where the store can list them (holders started under a larger N). Exits 3 when no slot is held.")
	g.timeoutFlag(fs)
	asJSON := fs.Bool("json", false, "print a JSON object")
	slots := fs.Int("slots", 0, "show the holders of the semaphore NAME of `N` slots, slot by slot")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() != 1 {
		return usageErrorf("status takes one NAME, got %d arguments", fs.NArg())
	}
	name := fs.Arg(0)
	if err := driver.CheckName(name); err != nil {
		return usageErrorf("%v", err)
	}
	if *slots < 0 || *slots > semaphore.MaxSlots {
		return usageErrorf("status: --slots %d: want 1 to %d slots (or 0, the default, for a plain lease)", *slots, semaphore.MaxSlots)
	}
	ctx, cancel := g.oneShot(ctx)
	defer cancel()
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker(l, &err)
	if *slots > 0 {
		return g.slotStatus(ctx, l, name, *slots, *asJSON)
	}

	got, err := bounded(ctx, func(ctx context.Context) (lease.Lease, error) { return l.Inspect(ctx, name) }, nil)
	held := err == nil
	if err != nil && !errors.Is(err, lease.ErrNotHeld) {
		return g.storeError(ctx, err)
	}
	now := time.Now()
	if *asJSON {
		v := leaseJSON{Name: name}
		if held {
			v = toJSON(got, now)
		}
		if err := writeJSON(g.stdout, v); err != nil {
			return err
		}
	} else if held {
		since := acquiredText(got)
		if d := heldFor(got, now); d > 0 {
			since += fmt.Sprintf(", held for %s", roundDuration(d))
		}
		fmt.Fprintf(g.stdout, "%s: held by %s, token %d, acquired %s, %s left (expires %s)\n",
			quoteName(name), got.Owner, got.Token, since, roundDuration(remaining(got, now)), got.Expires.Local().Format(time.RFC3339))
	} else {
		fmt.Fprintf(g.stdout, "%s: not held\n", quoteName(name))
	}
	if !held {
		return &exitError{code: exitNotHeld}
	}
	return nil
}

// slotsJSON is how status --slots --json prints a semaphore.
type slotsJSON struct {
	Name    string     `json:"name"`
	Slots   int        `json:"slots"`
	Held    int        `json:"held"`
	Holders []slotJSON `json:"holders"`
}

// slotJSON is one held slot: its index and its tenure.
type slotJSON struct {
	Slot int `json:"slot"`
	leaseJSON
}

// slotStatus is "lease status --slots N NAME".
func (g *globals) slotStatus(ctx context.Context, l lease.Locker, name string, n int, asJSON bool) error {
	holders, err := bounded(ctx, func(ctx context.Context) ([]semaphore.Slot, error) { return semaphore.Holders(ctx, l, name, n) }, nil)
	if err != nil {
		return g.storeError(ctx, err)
	}
	now := time.Now()
	if asJSON {
		v := slotsJSON{Name: name, Slots: n, Held: len(holders), Holders: []slotJSON{}}
		for _, s := range holders {
			v.Holders = append(v.Holders, slotJSON{Slot: s.Index, leaseJSON: toJSON(s.Lease, now)})
		}
		if err := writeJSON(g.stdout, v); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.stdout, "%s: %d of %d slots held\n", quoteName(name), len(holders), n)
		for _, s := range holders {
			above := ""
			if s.Index >= n {
				above = fmt.Sprintf(" (above --slots %d: a holder under a larger capacity)", n)
			}
			since := acquiredText(s.Lease)
			if d := heldFor(s.Lease, now); d > 0 {
				since += fmt.Sprintf(", held for %s", roundDuration(d))
			}
			fmt.Fprintf(g.stdout, "  slot %d%s: held by %s, token %d, acquired %s, %s left (expires %s)\n",
				s.Index, above, s.Lease.Owner, s.Lease.Token, since, roundDuration(remaining(s.Lease, now)), s.Lease.Expires.Local().Format(time.RFC3339))
		}
	}
	if len(holders) == 0 {
		return &exitError{code: exitNotHeld}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// quoteName shows a name as is when it is plain, quoted when it holds
// spaces or control characters.
func quoteName(name string) string {
	for _, r := range name {
		if r <= ' ' || r == '"' || r == 0x7f {
			return fmt.Sprintf("%q", name)
		}
	}
	return name
}

// roundDuration rounds d for people: to the second above a minute, to the
// millisecond below.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
