package sqllease

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// clockSlack is how far the database's clock may be behind this
// process's: the test databases run on this machine, and acquired_at is
// whole milliseconds, truncated.
const clockSlack = time.Second

// TestAcquiredIsTheTenuresStart checks, on every dialect (and on MySQL
// also on the MySQL 8 path), that Lease.Acquired is acquired_at: set by
// Acquire to a moment between the request's start and its return, the
// same from Renew, re-entrant Acquire, Inspect, List and ForceRelease, and
// new for a new tenure.
func TestAcquiredIsTheTenuresStart(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		t.Run("returning", func(t *testing.T) { checkAcquired(t, s.newLocker(t)) })
		if s.dialect == MySQL {
			t.Run("mysql8-path", func(t *testing.T) {
				l := s.newLocker(t)
				forceMySQL8Path(t, l)
				checkAcquired(t, l)
			})
		}
	})
}

func checkAcquired(t *testing.T, l *Locker) {
	ctx := context.Background()
	name := "acquired-" + randomTable()
	const ttl = time.Minute

	// within acquires name for owner and checks that the Lease's Acquired
	// lies between the request's start (less the slack) and its return.
	within := func(owner string) lease.Lease {
		t.Helper()
		start := time.Now()
		got, err := l.Acquire(ctx, name, owner, ttl)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		if got.Acquired.IsZero() {
			t.Fatalf("Acquire returned %v with a zero Acquired", got)
		}
		if got.Acquired.Before(start.Add(-clockSlack)) || got.Acquired.After(end) {
			t.Fatalf("Acquired %s is outside [%s - %s, %s]: the request's start and its return",
				got.Acquired.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano), clockSlack, end.Format(time.RFC3339Nano))
		}
		return got
	}
	same := func(what string, got, want lease.Lease) {
		t.Helper()
		if !got.Acquired.Equal(want.Acquired) {
			t.Errorf("%s: Acquired %s, want the tenure's %s", what, got.Acquired.Format(time.RFC3339Nano), want.Acquired.Format(time.RFC3339Nano))
		}
	}

	first := within("a")
	time.Sleep(5 * time.Millisecond) // so that a changed acquired_at would show
	renewed, err := l.Renew(ctx, first, ttl)
	if err != nil {
		t.Fatal(err)
	}
	same("Renew", renewed, first)
	again, err := l.Acquire(ctx, name, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	same("re-entrant Acquire", again, first)
	seen, err := l.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	same("Inspect", seen, first)
	listed, err := l.List(ctx, name)
	if err != nil || len(listed) != 1 {
		t.Fatalf("List: %v, %v; want the one tenure", listed, err)
	}
	same("List", listed[0], first)
	all, err := l.List(ctx, "")
	if err != nil || len(all) == 0 {
		t.Fatalf("List of everything: %v, %v", all, err)
	}
	for _, ls := range all {
		if ls.Name == name {
			same("List of everything", ls, first)
		}
	}

	// A Renew given a Lease without Acquired (made by hand) gets the
	// tenure's from the store, except on MySQL, whose renew statement
	// cannot return it: there the Locker keeps the caller's.
	bare := again
	bare.Acquired = time.Time{}
	renewed, err = l.Renew(ctx, bare, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if l.s.dialect != MySQL {
		same("Renew of a Lease without Acquired", renewed, first)
	} else if !renewed.Acquired.IsZero() {
		t.Errorf("MySQL Renew of a Lease without Acquired: Acquired %s, want it kept (zero)", renewed.Acquired)
	}

	// A new tenure, after Release, begins later.
	if err := l.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	second := within("b")
	if !second.Acquired.After(first.Acquired) {
		t.Errorf("new tenure's Acquired %s is not after the old one's %s", second.Acquired, first.Acquired)
	}
	if second.Token <= first.Token {
		t.Fatalf("new tenure's token %d, old %d", second.Token, first.Token)
	}
	// The holder's tenure as another owner's Acquire sees it is unchanged.
	if _, err := l.Acquire(ctx, name, "c", ttl); err == nil {
		t.Fatal("a third owner acquired a held name")
	}
	seen, err = l.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	same("Inspect after a refused Acquire", seen, second)
	ended, err := l.ForceRelease(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	same("ForceRelease", ended, second)

	// And a tenure that begins by taking over an expired one.
	short := name + "-short"
	old, err := l.Acquire(ctx, short, "a", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		start := time.Now()
		got, err := l.Acquire(ctx, short, "b", ttl)
		if err == nil {
			if !got.Acquired.After(old.Acquired) || got.Acquired.Before(start.Add(-clockSlack)) || got.Acquired.After(time.Now()) {
				t.Fatalf("takeover's Acquired %s: want after the expired tenure's %s and within the request", got.Acquired, old.Acquired)
			}
			break
		}
		if i > 1000 || time.Now().After(deadline) {
			t.Fatalf("the 50ms tenure never expired: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
