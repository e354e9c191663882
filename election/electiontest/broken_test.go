package electiontest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/election/electiontest"
)

// brokenEnv selects the store that TestBrokenStore runs the suite
// against, in a child process of TestSuiteCatchesBrokenStores: a broken
// mode, or "healthy" for the control.
const brokenEnv = "ELECTIONTEST_BROKEN_MODE"

// Each broken store breaks one promise; the named case must fail on it
// and pass on the healthy toy, the same wrapper with nothing broken.
var brokenModes = map[string]string{
	// Renew answers with a fresh Deadline without telling the store, so
	// the store gives the office away a ttl after the grant while the
	// leader, renewing, still leads.
	"renew-not-stored": "a_leader_renewing_for_several_ttls_keeps_the_office_while_others_wait",
	// Renew checks with the store that the tenure is intact but does not
	// extend it: the leader finds its lease lost a ttl after the grant,
	// before the Deadline its last renewal gave it.
	"renew-not-extended": "a_leader_renewing_for_several_ttls_keeps_the_office_while_others_wait",
	// Renew and Release work, but Acquire takes over any tenure granted
	// a ttl ago, renewed or not. Only the leader's work ever learns, at
	// the next renewal.
	"takeover-by-grant": "a_leader_renewing_for_several_ttls_keeps_the_office_while_others_wait",
	// Renew ends the tenure in the store and answers ErrLost: the leader
	// is told it lost long before its Deadline.
	"renew-ends-tenure": "a_leader_renewing_for_several_ttls_keeps_the_office_while_others_wait",
}

// slowModes are toys that keep every promise but are too slow for a case
// to test it: the case must say "could not test" and skip, not fail.
var slowModes = map[string]string{
	// Renew hangs until its context ends (the store unreachable): the
	// leader's Deadline passes and the tenure expires, as it should.
	"renewals-hang": "a_leader_renewing_for_several_ttls_keeps_the_office_while_others_wait",
}

// toyTTL is the toys' ttl: short, so that the cases are quick, and long
// enough for renewals every third of it on a loaded machine.
const toyTTL = 500 * time.Millisecond

func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("running as a child")
	}
	if testing.Short() {
		t.Skip("starts a process per broken store")
	}
	child := func(mode, want string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$/^"+want+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), brokenEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	cases := map[string]bool{}
	for mode, want := range brokenModes {
		cases[want] = true
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out, err := child(mode, want)
			if err == nil {
				t.Fatalf("the suite passed a store broken by %q:\n%s", mode, tail(out))
			}
			if !strings.Contains(out, "--- FAIL: TestBrokenStore/"+want) {
				t.Fatalf("the suite failed the %q store, but not in case %q:\n%s", mode, want, tail(out))
			}
		})
	}
	for mode, want := range slowModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out, err := child(mode, want)
			if err != nil || !strings.Contains(out, "--- SKIP: TestBrokenStore/"+want) || !strings.Contains(out, "could not test") {
				t.Fatalf("case %q should report that it could not test the %q toy, which breaks no promise (err %v):\n%s", want, mode, err, tail(out))
			}
		})
	}
	// The control: each of those cases passes the toy with nothing broken.
	for want := range cases {
		t.Run("healthy/"+want, func(t *testing.T) {
			t.Parallel()
			out, err := child("healthy", want)
			switch {
			case err != nil:
				t.Fatalf("case %q failed the healthy toy:\n%s", want, tail(out))
			case strings.Contains(out, "--- SKIP: TestBrokenStore/"+want):
				t.Logf("case %q could not test the healthy toy on this machine:\n%s", want, tail(out))
			case !strings.Contains(out, "--- PASS: TestBrokenStore/"+want):
				t.Fatalf("case %q did not run on the healthy toy:\n%s", want, tail(out))
			}
		})
	}
}

func TestBrokenStore(t *testing.T) {
	mode := os.Getenv(brokenEnv)
	if mode == "" {
		t.Skip("only run as a child of TestSuiteCatchesBrokenStores")
	}
	if _, ok := brokenModes[mode]; !ok && slowModes[mode] == "" && mode != "healthy" {
		t.Fatalf("unknown mode %q", mode)
	}
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	electiontest.Run(t, electiontest.Harness{
		New: func(testing.TB) lease.Locker { return &toyLocker{Locker: store.Share(), mode: mode} },
		TTL: toyTTL,
	})
}

// toyLocker is a handle on a memory store, correct unless mode says how
// to break it. It hides the store's optional interfaces, so candidates
// on it poll.
type toyLocker struct {
	lease.Locker
	mode   string
	closed atomic.Bool
}

func (l *toyLocker) Renew(ctx context.Context, held lease.Lease, ttl time.Duration) (lease.Lease, error) {
	switch l.mode {
	case "renew-ends-tenure":
		if _, err := l.Locker.(lease.ForceReleaser).ForceRelease(ctx, held.Name); err != nil {
			return lease.Lease{}, err
		}
		return lease.Lease{}, fmt.Errorf("toy: renew %q: %w", held.Name, lease.ErrLost)
	case "renewals-hang":
		<-ctx.Done()
		return lease.Lease{}, ctx.Err()
	case "renew-not-stored", "renew-not-extended":
		if err := ctx.Err(); err != nil {
			return lease.Lease{}, err
		}
		if l.closed.Load() {
			return lease.Lease{}, fmt.Errorf("toy: %w", lease.ErrClosed)
		}
		start := time.Now()
		if l.mode == "renew-not-extended" {
			cur, err := l.Inspect(ctx, held.Name)
			switch {
			case errors.Is(err, lease.ErrNotHeld), err == nil && cur.Token != held.Token:
				return lease.Lease{}, fmt.Errorf("toy: renew %q: %w", held.Name, lease.ErrLost)
			case err != nil:
				return lease.Lease{}, err
			}
		}
		held.Expires, held.Deadline = start.Add(ttl), start.Add(ttl-lease.DriftMargin(ttl))
		return held, nil
	}
	return l.Locker.Renew(ctx, held, ttl)
}

func (l *toyLocker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	got, err := l.Locker.Acquire(ctx, name, owner, ttl)
	if l.mode == "takeover-by-grant" && errors.Is(err, lease.ErrHeld) {
		// The store judges the holder by its grant, as if renewals did
		// not count: a tenure granted a ttl ago is taken over.
		cur, ierr := l.Inspect(ctx, name)
		if ierr == nil && !cur.Acquired.IsZero() && time.Since(cur.Acquired) >= ttl {
			if _, ferr := l.Locker.(lease.ForceReleaser).ForceRelease(ctx, name); ferr == nil {
				return l.Locker.Acquire(ctx, name, owner, ttl)
			}
		}
	}
	return got, err
}

func (l *toyLocker) Close() error {
	l.closed.Store(true)
	return l.Locker.Close()
}

// tail returns the last lines of a child's output.
func tail(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
