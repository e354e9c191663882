package etcdlease

import (
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/testenv"
)

// Fair waiting is a policy over the turn marks (driver.Mark.Fair): these
// tests call the store's AcquireOrWait with Fair set.

// fair is AcquireOrWait of name by owner for waiter with Mark.Fair and a
// mark life of life.
func fair(t *testing.T, l *Locker, name, owner, waiter string, life time.Duration) driver.Tenure {
	t.Helper()
	got, err := l.s.AcquireOrWait(t.Context(), name, owner, time.Minute, driver.Mark{Waiter: waiter, Life: life, Fair: true})
	if err != nil {
		t.Fatalf("fair AcquireOrWait(%q, %q): %v", name, owner, err)
	}
	return got
}

// fairWaits is fair, which must find name free with another waiter's
// mark ahead: no owner, and the time that mark has left.
func fairWaits(t *testing.T, l *Locker, name, owner, waiter string, life time.Duration) driver.Tenure {
	t.Helper()
	got := fair(t, l, name, owner, waiter, life)
	if got.Owner != "" || got.Token != 0 || got.Remaining <= 0 {
		t.Fatalf("fair AcquireOrWait(%q, %q) = %+v; want no owner and the first mark's remaining time (another waiter is first)", name, owner, got)
	}
	return got
}

// fairTakes is fair, which must acquire name.
func fairTakes(t *testing.T, l *Locker, name, owner, waiter string) driver.Tenure {
	t.Helper()
	got := fair(t, l, name, owner, waiter, markLife)
	if got.Owner != owner || got.Token == 0 {
		t.Fatalf("fair AcquireOrWait(%q, %q) = %+v; want it acquired", name, owner, got)
	}
	return got
}

// TestFairServesTheLineInOrder: four waiters mark a held name in turn;
// after each release, every one of them asks with Fair, and only the one
// whose mark is first acquires: the others get no owner and the first
// mark's remaining time, and keep their places. A waiter without a mark
// is behind every live mark. Without Fair, a free name is taken whatever
// the line.
func TestFairServesTheLineInOrder(t *testing.T) {
	t.Parallel()
	ls, _ := turnLockers(t, 5)
	holder, waiters := ls[0], ls[1:]
	ctx := t.Context()
	name := uniqueName("fair-order")
	ids := []string{"waiter-0", "waiter-1", "waiter-2", "waiter-3"}
	held, err := holder.s.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range waiters {
		if got := fair(t, l, name, "owner-"+ids[i], ids[i], markLife); got.Owner != "holder" {
			t.Fatalf("fair AcquireOrWait of a held name = %+v; want the holder's tenure", got)
		}
	}
	if got := waitersOf(t, holder, name); len(got) != 4 || got[0] != ids[0] || got[3] != ids[3] {
		t.Fatalf("marks %v, want %v", got, ids)
	}
	// A waiter without a mark does not pass the line, and joins its back.
	late := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(holder.s.prefix))
	prev := held
	for i := range waiters {
		if ok, err := holder.s.Release(ctx, prev); err != nil || !ok {
			t.Fatalf("Release: %v, %v", ok, err)
		}
		if i == 0 {
			fairWaits(t, late, name, "owner-late", "waiter-late", markLife)
		}
		// Those behind first, then the first.
		for j := len(waiters) - 1; j > i; j-- {
			fairWaits(t, waiters[j], name, "owner-"+ids[j], ids[j], markLife)
		}
		prev = fairTakes(t, waiters[i], name, "owner-"+ids[i], ids[i])
		want := append(append([]string{}, ids[i+1:]...), "waiter-late")
		if got := waitersOf(t, holder, name); len(got) != len(want) || len(got) > 0 && got[0] != want[0] {
			t.Fatalf("marks after %s took its turn: %v, want %v", ids[i], got, want)
		}
		if ok, err := waiters[i].s.Release(ctx, prev); err != nil || !ok {
			t.Fatalf("Release: %v, %v", ok, err)
		}
		prev, err = holder.s.Acquire(ctx, name, "holder", time.Minute)
		if err != nil || prev.Owner != "holder" {
			t.Fatalf("a plain Acquire of a free name with waiters in line = %+v, %v; want it acquired (plain Acquire is never held back)", prev, err)
		}
	}
	if ok, err := holder.s.Release(ctx, prev); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	// Without Fair, AcquireOrWait takes the free name past late's mark.
	got := take(t, holder, name, "owner-x", "waiter-x", false)
	if ok, err := holder.s.Release(ctx, got); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	fairTakes(t, late, name, "owner-late", "waiter-late")
	if got := marksOf(t, holder, name); len(got) != 0 {
		t.Fatalf("marks left after every waiter's turn: %v", got)
	}
}

// TestFairRemainingIsTheFirstMarksTime: a fair AcquireOrWait held back by
// another waiter's mark reports the time that mark has left by its etcd
// lease (the first waiter's life), not the caller's own mark life.
func TestFairRemainingIsTheFirstMarksTime(t *testing.T) {
	t.Parallel()
	ls, _ := turnLockers(t, 3)
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	name := uniqueName("fair-remaining")
	held, err := holder.s.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fair(t, a, name, "owner-a", "waiter-a", 20*time.Second)
	if ok, err := holder.s.Release(ctx, held); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	got := fairWaits(t, b, name, "owner-b", "waiter-b", 3*time.Second)
	if got.Remaining <= 3*time.Second || got.Remaining > 21*time.Second {
		t.Fatalf("Remaining %s; want the first mark's (about 20s), not the caller's mark life (3s)", got.Remaining)
	}
	if got := waitersOf(t, a, name); len(got) != 2 || got[0] != "waiter-a" || got[1] != "waiter-b" {
		t.Fatalf("marks %v, want [waiter-a waiter-b]", got)
	}
}

// TestFairLapsedMarkHoldsNoOneUp: the first waiter's mark lapses with
// its etcd lease when it stops asking, and the waiter behind then gets
// the free name.
func TestFairLapsedMarkHoldsNoOneUp(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ls, _ := turnLockers(t, 3)
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	name := uniqueName("fair-lapse")
	held, err := holder.s.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fair(t, a, name, "owner-a", "waiter-a", time.Second)
	if ok, err := holder.s.Release(ctx, held); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	fairWaits(t, b, name, "owner-b", "waiter-b", markLife)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := fair(t, b, name, "owner-b", "waiter-b", markLife)
		if got.Owner == "owner-b" {
			break
		}
		if got.Owner != "" || time.Now().After(deadline) {
			t.Fatalf("fair AcquireOrWait after the first mark's life = %+v; want it acquired once a's mark lapsed (within 10s)", got)
		}
		time.Sleep(got.Remaining / 4)
	}
}

// TestFairTurnIsOneRoundTrip: a waiter whose turn has come acquires with
// one round trip: one transaction, with the keep-alive of the tenure's
// pooled lease alongside; the transaction compares its mark's place and
// takes the mark away.
func TestFairTurnIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	l, w := newLocker(t)
	warm(t, l, time.Minute, markLife)
	name := uniqueName("fair-rtt")
	held, err := l.s.Acquire(t.Context(), name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fair(t, l, name, "owner", "waiter", markLife)
	if ok, err := l.s.Release(t.Context(), held); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	l.settle()
	w.take()
	var got driver.Tenure
	err = w.waves(t, func() (err error) {
		got, err = l.s.AcquireOrWait(t.Context(), name, "owner", time.Minute, driver.Mark{Waiter: "waiter", Life: markLife, Fair: true})
		return err
	}, []string{"KeepAlive", "Txn"})
	if err != nil {
		t.Fatalf("fair AcquireOrWait at the waiter's turn: %v", err)
	}
	if got.Owner != "owner" || got.Token <= held.Token {
		t.Fatalf("fair AcquireOrWait at the waiter's turn = %+v; want a tenure of owner with a token above %d", got, held.Token)
	}
	if got := marksOf(t, l, name); len(got) != 0 {
		t.Fatalf("the waiter's mark is still there after its turn: %v", got)
	}
}

// TestListLeavesOutMarks: the marks and pass keys of a name are keys
// under the Locker's prefix, but never tenures: List does not show them.
func TestListLeavesOutMarks(t *testing.T) {
	t.Parallel()
	ls, _ := turnLockers(t, 2)
	l, a := ls[0], ls[1]
	ctx := t.Context()
	name := uniqueName("fair-list")
	held, err := l.s.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, a, name, "owner-a", "waiter-a", false)
	wait(t, l, name, "owner-b", "waiter-b", false)
	if ok, err := l.s.Release(ctx, held); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	if err := a.s.StopWaiting(ctx, name, "waiter-a"); err != nil { // puts the pass key
		t.Fatal(err)
	}
	if _, err := l.s.Acquire(ctx, uniqueName("fair-list-other"), "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	all, err := l.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name == name {
		t.Fatalf("List = %v; want only the other name's tenure", all)
	}
}
