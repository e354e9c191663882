package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// The optional interfaces, checked where a Locker implements them.

// listUnderPrefix: list returns the held tenures under a prefix in name
// order: not a released or an expired one, and not a name that a prefix
// with the wildcard characters of SQL LIKE or glob patterns would match
// as a pattern but does not start with literally.
func listUnderPrefix(t testing.TB, s *suite) {
	l := s.locker(t)
	lister, ok := l.(lease.Lister)
	if !ok {
		t.Skip("the Locker does not implement lease.Lister")
	}
	prefix := s.name("list/")
	if _, err := lister.List(t.Context(), prefix); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("the store cannot list: ", err)
	}
	b, _ := s.acquire(t, l, prefix+"b", "owner-b", long)
	a, _ := s.acquire(t, l, prefix+"a", "owner-a", long)
	gone, _ := s.acquire(t, l, prefix+"c", "owner-c", long)
	if err := l.Release(t.Context(), gone); err != nil {
		t.Fatalf("Release: %v", err)
	}
	expiredName := prefix + "d"
	_, granted := s.acquire(t, l, expiredName, "owner-d", s.h.TTL)
	s.acquire(t, l, s.name("list-elsewhere"), "owner-x", long)
	// Names a pattern would match: in SQL LIKE "%" matches anything and
	// "_" one character; in a glob "*" matches anything, "?" one
	// character and "[bc]" one of a class. Each of these names matches
	// wild read as one of those patterns, and none starts with it.
	base := s.name("list-wild/")
	wild := base + "a%_*?[bc]/"
	literal, _ := s.acquire(t, l, wild+"x", "owner-w", long)
	for _, like := range []string{"aZZ*?[bc]/y", "a%X*?[bc]/y", "a%_QQb/y"} {
		s.acquire(t, l, base+like, "owner-v", long)
	}
	s.expire(t, l, expiredName, s.h.TTL, granted)
	got, err := lister.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	if len(got) != 2 {
		t.Fatalf("List(%q) returned %d tenures, want 2 (a and b; c was released): %v", prefix, len(got), got)
	}
	for i, want := range []lease.Lease{a, b} {
		if got[i].Name != want.Name || got[i].Owner != want.Owner || got[i].Token != want.Token {
			t.Fatalf("List(%q)[%d] = %v, want %v", prefix, i, got[i], want)
		}
	}
	got, err = lister.List(t.Context(), wild)
	if err != nil {
		t.Fatalf("List(%q): %v", wild, err)
	}
	if len(got) != 1 || got[0].Name != literal.Name {
		var names []string
		for _, g := range got {
			names = append(names, g.Name)
		}
		t.Fatalf("List(%q) returned %q; want only %q: a prefix is literal, never a LIKE or glob pattern", wild, names, literal.Name)
	}
}

// forceRelease: force release ends any tenure and keeps token order.
func forceRelease(t testing.TB, s *suite) {
	l := s.locker(t)
	fr, ok := l.(lease.ForceReleaser)
	if !ok {
		t.Skip("the Locker does not implement lease.ForceReleaser")
	}
	ctx := t.Context()
	name := s.name("force")
	_, err := fr.ForceRelease(ctx, name)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("the store cannot force a release: ", err)
	}
	if !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("ForceRelease of a free name: got %v, want ErrNotHeld", err)
	}
	held, _ := s.acquire(t, l, name, "owner-a", long)
	got, err := fr.ForceRelease(ctx, name)
	if err != nil {
		t.Fatalf("ForceRelease of a held name: %v", err)
	}
	if got.Owner != held.Owner || got.Token != held.Token {
		t.Fatalf("ForceRelease returned %v, want the ended tenure %v", got, held)
	}
	s.mustBeFree(t, l, name, "after ForceRelease")
	_, err = l.Renew(ctx, held, long)
	mustBeLost(t, "Renew after ForceRelease", err)
	mustBeLost(t, "Release after ForceRelease", l.Release(ctx, held))
	next, _ := s.acquire(t, l, name, "owner-b", long)
	if next.Token <= held.Token {
		t.Fatalf("Acquire after ForceRelease got token %d, not greater than %d", next.Token, held.Token)
	}
	// The evicted owner itself starts a new tenure, with a larger token:
	// its old one ended.
	if _, err := fr.ForceRelease(ctx, name); err != nil {
		t.Fatalf("ForceRelease of a held name: %v", err)
	}
	again, _ := s.acquire(t, l, name, "owner-b", long)
	if again.Token <= next.Token {
		t.Fatalf("the evicted owner's Acquire after ForceRelease got token %d, not greater than its evicted tenure's %d", again.Token, next.Token)
	}
	_, err = l.Renew(ctx, next, long)
	mustBeLost(t, "Renew of the evicted tenure after its owner acquired again", err)
}

// watchWakesOnRelease: a watch on a name wakes when its tenure is
// released or force-released, and a stopped watch can be stopped again.
func watchWakesOnRelease(t testing.TB, s *suite) {
	l := s.locker(t)
	watchWakes(t, s, l, l, "watch")
}

// watchWakesOnAnotherLockersRelease: a watch on a name wakes when another
// Locker on the store (another process) releases or force-releases its
// tenure, which is what waiting woken by the store is for.
func watchWakesOnAnotherLockersRelease(t testing.TB, s *suite) {
	watchWakes(t, s, s.locker(t), s.locker(t), "watch-other")
}

// watchWakes watches a name on l and checks that it wakes when other
// (l itself, or another Locker) releases and force-releases the name's
// tenure.
func watchWakes(t testing.TB, s *suite, l, other lease.Locker, label string) {
	w, ok := l.(driver.Watcher)
	if !ok {
		t.Skip("the Locker does not implement driver.Watcher")
	}
	ctx := t.Context()
	name := s.name(label)
	watch, err := w.Watch(ctx, name)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("the store cannot watch: ", err)
	}
	if err != nil {
		failCall(t, "Watch", err)
	}
	defer watch.Stop()
	drain := func() {
		for {
			select {
			case <-watch.Changed():
			default:
				return
			}
		}
	}
	wake := func(what string) {
		t.Helper()
		select {
		case <-watch.Changed():
		case <-time.After(5*time.Second + s.h.ExpiryLag):
			t.Fatalf("the watch on %q did not wake within 5s of %s", name, what)
		}
	}
	held, _ := s.acquire(t, other, name, "owner-a", long)
	drain() // an Acquire may wake it too: wake-ups are hints
	// The waiter does not wait for the releaser's call to return: the
	// wake-up that comes with the release means free, and another owner
	// acquires at once. (A wake-up is a hint, so one that comes early,
	// with the name still held, is let pass; the release's own must
	// follow it.)
	released := make(chan error, 1)
	go func() { released <- other.Release(ctx, held) }()
	var woken lease.Lease
	for wakes := 1; ; wakes++ {
		wake("a Release")
		var err error
		woken, err = l.Acquire(ctx, name, "owner-woken", long)
		if err == nil {
			break
		}
		if !errors.Is(err, lease.ErrHeld) {
			failCall(t, "Acquire right after the watch woke", err)
		}
		if wakes == 3 {
			t.Fatalf("the watch on %q woke %d times for one Release, and each time the name was still held (%v): it wakes before the release has taken effect", name, wakes, err)
		}
	}
	if err := <-released; err != nil {
		failCall(t, "Release", err)
	}
	if err := l.Release(ctx, woken); err != nil {
		failCall(t, "Release", err)
	}
	if fr, ok := other.(lease.ForceReleaser); ok {
		s.acquire(t, other, name, "owner-b", long)
		drain()
		if _, err := fr.ForceRelease(ctx, name); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			failCall(t, "ForceRelease", err)
		} else if err == nil {
			wake("a ForceRelease")
			s.acquire(t, l, name, "owner-woken", long)
		}
	}
	watch.Stop()
	watch.Stop()
}

// canTellsTheTruth: lease.Can says yes to an optional interface exactly
// when its methods work, and no exactly when they report
// errors.ErrUnsupported, so a caller can ask before it offers an
// operation (an operator's command, a watch).
func canTellsTheTruth(t testing.TB, s *suite) {
	l := s.locker(t)
	ctx := t.Context()
	name := s.name("can")
	check := func(iface string, can, has bool, err error) {
		t.Helper()
		switch {
		case !has && can:
			t.Errorf("lease.Can[lease.%s] is true, but the Locker (%T) does not implement it", iface, l)
		case !has:
		case can && errors.Is(err, errors.ErrUnsupported):
			t.Errorf("lease.Can[lease.%s] is true, but its method reports errors.ErrUnsupported: %v", iface, err)
		case !can && !errors.Is(err, errors.ErrUnsupported):
			t.Errorf("lease.Can[lease.%s] is false, but its method did not report errors.ErrUnsupported (err = %v)", iface, err)
		}
	}
	{
		lister, has := l.(lease.Lister)
		var err error
		if has {
			_, err = lister.List(ctx, name)
		}
		check("Lister", lease.Can[lease.Lister](l), has, err)
	}
	{
		fr, has := l.(lease.ForceReleaser)
		var err error
		if has {
			if _, err = fr.ForceRelease(ctx, name); errors.Is(err, lease.ErrNotHeld) {
				err = nil
			}
		}
		check("ForceReleaser", lease.Can[lease.ForceReleaser](l), has, err)
	}
	{
		w, has := l.(driver.Watcher)
		var err error
		if has {
			var watch driver.Watch
			if watch, err = w.Watch(ctx, name); err == nil {
				watch.Stop()
			}
		}
		check("driver.Watcher", lease.Can[driver.Watcher](l), has, err)
	}
}
