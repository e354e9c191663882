package sqllease

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	t.Parallel()
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
			queued := len(wants)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				n := l.s.acquires.Waiting()
				if n == queued {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d Acquires queued; want %d", n, len(wants), queued)
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

// TestMariaDBAcquiresShareStatements: on MariaDB, Acquires that arrive
// while every acquire slot is under way (two, on a pool of four) wait,
// and go out in batch takeover statements (no two of one name in a
// batch), each with the outcome its own statement would give: a free name
// acquired, a name another owner holds refused with the holder named, the
// caller's own re-entered with its token, and of three owners racing for
// one name, exactly one winner. Without the sharing they would each wait
// for a slot and go alone.
func TestMariaDBAcquiresShareStatements(t *testing.T) {
	t.Parallel()
	s := mysqlStore(t)
	var c counter
	db := countingDB(t, s, &c)
	db.SetMaxOpenConns(4)
	l, err := New(db, WithTable(s.table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := cap(l.s.acquireSlots); n != 2 {
		t.Fatalf("%d acquire slots on a pool of 4; want 2", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := fmt.Sprintf("maria-shared-%d/", time.Now().UnixNano())
	if _, err := l.Acquire(ctx, prefix+"busy", "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	mine, err := l.Acquire(ctx, prefix+"mine", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !l.s.batches() {
		t.Fatalf("%s: Acquires do not share statements; want MariaDB 10.5+", s.dialect)
	}
	takeover := func(q string) bool {
		return strings.HasPrefix(strings.TrimSpace(q), "INSERT INTO") && strings.Contains(q, "ON DUPLICATE KEY UPDATE")
	}
	batch := func(q string) bool { return strings.Contains(q, "RETURNING lease_key") }
	lanes := []lease.Lease{{Name: prefix + "lane/0"}, {Name: prefix + "lane/1"}}
	open := holdLanes(t, &c, func(q string) bool { return takeover(q) && !batch(q) }, lanes, func(ls lease.Lease) error {
		_, err := l.Acquire(ctx, ls.Name, "me", time.Minute)
		return err
	})

	type call struct {
		name, owner string
		got         lease.Lease
		err         error
	}
	var calls []*call
	for i := range 5 {
		calls = append(calls, &call{name: fmt.Sprintf("%sfree/%d", prefix, i), owner: "me"})
	}
	calls = append(calls, &call{name: prefix + "busy", owner: "me"}, &call{name: prefix + "mine", owner: "me"})
	for _, o := range []string{"a", "b", "c"} {
		calls = append(calls, &call{name: prefix + "race", owner: o})
	}
	var wg sync.WaitGroup
	for _, cl := range calls {
		wg.Go(func() { cl.got, cl.err = l.Acquire(ctx, cl.name, cl.owner, time.Minute) })
	}
	waitWaiting(t, &l.s.acquires, len(calls))
	open()
	wg.Wait()

	stmts, _ := c.take()
	var singles, batches, rows int
	for _, st := range stmts {
		if !takeover(st.query) {
			continue
		}
		if !batch(st.query) {
			singles++
		} else {
			batches++
			rows += len(st.args) / 5
		}
	}
	// The lanes' own statements are recorded once they are let go.
	if singles != len(lanes) || batches == 0 || batches > 3 || rows != len(calls) {
		t.Errorf("the %d waiting Acquires and %d on the lanes sent %d single and %d batch takeover statements carrying %d rows; want %d single (the lanes'), 1 to 3 batches (the racing name goes once per batch) and %d rows", len(calls), len(lanes), singles, batches, rows, len(lanes), len(calls))
	}
	var winner string
	for _, cl := range calls {
		var he *lease.HeldError
		switch {
		case strings.HasSuffix(cl.name, "/busy"):
			if !errors.As(cl.err, &he) || he.Owner != "other" {
				t.Errorf("Acquire of a name other holds: %v; want ErrHeld naming other", cl.err)
			}
		case strings.HasSuffix(cl.name, "/mine"):
			if cl.err != nil || cl.got.Token != mine.Token {
				t.Errorf("re-entrant Acquire: %+v, %v; want token %d", cl.got, cl.err, mine.Token)
			}
		case strings.HasSuffix(cl.name, "/race"):
			if cl.err == nil {
				if winner != "" {
					t.Errorf("both %s and %s acquired the raced name", winner, cl.owner)
				}
				winner = cl.owner
			} else if !errors.As(cl.err, &he) {
				t.Errorf("racing Acquire by %s: %v; want it acquired or ErrHeld", cl.owner, cl.err)
			}
		default:
			if cl.err != nil || cl.got.Owner != "me" || cl.got.Token == 0 {
				t.Errorf("Acquire of free %s: %+v, %v", cl.name, cl.got, cl.err)
			}
		}
	}
	if winner == "" {
		t.Error("nobody acquired the raced name")
	}
}
