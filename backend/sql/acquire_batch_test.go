package sqllease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestBatchedAcquiresGiveSingleAnswers: Acquires that wait for a slot and
// share takeover statements each get the answer its own statement would
// give: a free name is acquired, a name another owner holds is ErrHeld
// naming that owner, a name the caller holds is re-entered with its token,
// and of several owners racing for one free name exactly one wins while
// the others are told it holds it. On PostgreSQL and MariaDB every one of
// them waits in the queue, so they go in batches (SQLite sends each alone).
func TestBatchedAcquiresGiveSingleAnswers(t *testing.T) {
	allStores(t, func(t *testing.T, s *testStore) {
		ctx := context.Background()
		l := s.openLocker(t, WithPoolSize(8, 2))
		const ttl = time.Minute
		type want struct {
			name, owner string
			held        string // another owner holds it: ErrHeld naming it
			token       uint64 // re-entrant: this token
			race        bool   // one of several owners
		}
		var wants []want
		for i := range 30 {
			wants = append(wants, want{name: fmt.Sprintf("batch/free/%d", i), owner: "me"})
		}
		for i := range 10 {
			name := fmt.Sprintf("batch/held/%d", i)
			if _, err := l.Acquire(ctx, name, "other", ttl); err != nil {
				t.Fatal(err)
			}
			wants = append(wants, want{name: name, owner: "me", held: "other"})
		}
		for i := range 10 {
			name := fmt.Sprintf("batch/mine/%d", i)
			got, err := l.Acquire(ctx, name, "me", ttl)
			if err != nil {
				t.Fatal(err)
			}
			wants = append(wants, want{name: name, owner: "me", token: got.Token})
		}
		for i := range 10 {
			for _, o := range []string{"a", "b", "c"} {
				wants = append(wants, want{name: fmt.Sprintf("batch/race/%d", i), owner: o, race: true})
			}
		}

		// Take every slot, so that the Acquires queue.
		for range cap(l.s.acquireSlots) {
			l.s.acquireSlots <- struct{}{}
		}
		got := make([]lease.Lease, len(wants))
		errs := make([]error, len(wants))
		var wg sync.WaitGroup
		for i, w := range wants {
			wg.Go(func() {
				c, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				got[i], errs[i] = l.Acquire(c, w.name, w.owner, ttl)
			})
		}
		if l.s.batches() {
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				n := l.s.acquires.Waiting()
				if n == len(wants) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d Acquires queued", n, len(wants))
				}
			}
		}
		for range cap(l.s.acquireSlots) {
			<-l.s.acquireSlots
		}
		wg.Wait()

		winners := map[string]string{}
		for i, w := range wants {
			err := errs[i]
			var he *lease.HeldError
			switch {
			case w.race:
				if err == nil {
					if prev, ok := winners[w.name]; ok {
						t.Fatalf("%s: both %s and %s acquired it", w.name, prev, w.owner)
					}
					winners[w.name] = w.owner
				} else if !errors.As(err, &he) {
					t.Fatalf("%s by %s: %v; want it acquired or ErrHeld", w.name, w.owner, err)
				}
			case w.held != "":
				if !errors.As(err, &he) || he.Owner != w.held {
					t.Fatalf("%s, held by %s: %v; want ErrHeld naming %s", w.name, w.held, err, w.held)
				}
			case err != nil:
				t.Fatalf("%s by %s: %v", w.name, w.owner, err)
			case w.token != 0 && got[i].Token != w.token:
				t.Fatalf("%s re-entered with token %d; want %d", w.name, got[i].Token, w.token)
			case got[i].Owner != w.owner || got[i].Token == 0:
				t.Fatalf("%s: got %+v", w.name, got[i])
			}
		}
		for i, w := range wants {
			var he *lease.HeldError
			if w.race && errors.As(errs[i], &he) && he.Owner != winners[w.name] {
				t.Fatalf("%s: %s was told %s holds it; %s won", w.name, w.owner, he.Owner, winners[w.name])
			}
		}
		if n := l.s.acquireBatches.Load(); l.s.batches() && n == 0 {
			t.Fatalf("%d Acquires waited in the queue and went in no batch", len(wants))
		} else {
			t.Logf("%d Acquires in %d batches", len(wants), n)
		}
		if len(winners) != 10 {
			t.Fatalf("%d of 10 raced names were acquired", len(winners))
		}
		for _, w := range wants {
			if w.race || w.held != "" {
				continue
			}
			cur, err := l.Inspect(ctx, w.name)
			if err != nil || cur.Owner != w.owner {
				t.Fatalf("Inspect %s after the batch: %+v, %v", w.name, cur, err)
			}
		}
	})
}
