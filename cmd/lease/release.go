package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// release is "lease release --force NAME".
func (g *globals) release(ctx context.Context, args []string) (err error) {
	fs := g.flags("release", "release --force NAME\n\nEnds the current tenure of NAME whoever holds it, for clearing a stuck lease.\nThe holder finds out at its next renewal (a lease run then stops its command).\nExits 3 when nobody holds NAME.")
	g.timeoutFlag(fs)
	force := fs.Bool("force", false, "required: end the tenure even though this process does not hold it")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() != 1 {
		return usageErrorf("release takes one NAME, got %d arguments", fs.NArg())
	}
	if !*force {
		return usageErrorf("release needs --force: only the holder releases a lease normally (lease run does, when its command exits); --force ends another holder's tenure")
	}
	name := fs.Arg(0)
	if err := driver.CheckName(name); err != nil {
		return usageErrorf("%v", err)
	}
	ctx, cancel := g.oneShot(ctx)
	defer cancel()
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker(l, &err)
	fr, ok := l.(lease.ForceReleaser)
	ok = ok && lease.Can[lease.ForceReleaser](l)
	if !ok {
		return failf(exitFailure, "this backend (%T) cannot force a release: it does not implement lease.ForceReleaser; wait for the lease to expire", l)
	}
	old, err := bounded(ctx, func(ctx context.Context) (lease.Lease, error) { return fr.ForceRelease(ctx, name) }, nil)
	if errors.Is(err, lease.ErrNotHeld) {
		return failf(exitNotHeld, "%s is not held: nothing to release", quoteName(name))
	}
	if err != nil {
		return g.storeError(ctx, err)
	}
	fmt.Fprintf(g.stdout, "released %s (was held by %s, token %d)\n", quoteName(name), old.Owner, old.Token)
	return nil
}
