package electiontest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
)

// oneLeaderAtATime: four candidates, each on its own Locker, take turns
// leading short terms (Lead in a loop, standing aside for half a ttl after
// each term); the fence sees no overlap and the terms strictly increase.
// A term lost because a renewal did not land in time (a slow store on a
// loaded machine) is logged: it breaks no promise, the fence judges it.
func oneLeaderAtATime(ctx context.Context, t *testing.T, s *suite) {
	office := s.office("contention")
	g := s.newLedger(office)
	const candidates, terms = 4, 12
	hold := s.h.TTL / 5
	var count atomic.Int32
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := range candidates {
		c, _ := s.candidate(t, office, fmt.Sprintf("cand-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				err := c.Lead(cctx, func(ctx context.Context, term election.Term) error {
					err := g.work(hold, 0)(ctx, term)
					if count.Add(1) >= terms {
						stop()
					}
					return err
				})
				switch {
				case err == nil, cctx.Err() != nil && isCancellation(err):
				case errors.Is(err, lease.ErrLost):
					t.Logf("%s: a term was lost: %v", c.ID(), err)
				default:
					t.Errorf("%s: Lead: %v", c.ID(), err)
					return
				}
				sleepCtx(cctx, s.h.TTL/2)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("only %d of %d terms were led before the case's timeout", count.Load(), terms)
	}
	spans := g.check(t)
	leaders := map[string]int{}
	for _, sp := range spans {
		leaders[sp.leader]++
	}
	if len(spans) < terms || len(leaders) < 2 {
		t.Errorf("%d terms led by %d candidates (%v); want at least %d terms and 2 leaders", len(spans), len(leaders), leaders, terms)
	}
	t.Logf("%d terms by %v; handoffs %s", len(spans), leaders, handoffs(spans))
}

// termsIncrease: the terms of one office strictly increase whoever leads
// and however the terms end (the work returning, Resign, a crash), and
// each term's Number is its lease's token.
func termsIncrease(ctx context.Context, t *testing.T, s *suite) {
	office := s.office("terms")
	g := s.newLedger(office)
	a, _ := s.candidate(t, office, "a")
	b, lb := s.candidate(t, office, "b")
	reader := s.locker(t)
	var numbers []uint64
	record := func(ctx context.Context, term election.Term) {
		held, ok := lease.FromContext(ctx)
		if !ok || held.Token != term.Number {
			t.Errorf("term %d: the work's context carries lease %v (ok %v); want the lease whose token is the term number", term.Number, held, ok)
		}
		cur, err := election.Current(ctx, reader, office)
		switch {
		case err != nil:
			t.Errorf("Current during term %d: %v", term.Number, err)
		case cur.Number != term.Number || cur.Leader != term.Leader:
			t.Errorf("Current during term %d of %s reads term %d of %q", term.Number, term.Leader, cur.Number, cur.Leader)
		}
		numbers = append(numbers, term.Number)
	}
	returns := func(ctx context.Context, term election.Term) error {
		record(ctx, term)
		return g.work(time.Millisecond, 0)(ctx, term)
	}
	noError(t, "a leads, its work returns", a.Lead(ctx, returns))
	noError(t, "b leads, its work returns", b.Lead(ctx, returns))
	noError(t, "a leads again", a.Lead(ctx, returns))

	ch := make(chan elect, 4)
	blocks := func(ctx context.Context, term election.Term) error {
		record(ctx, term)
		ch <- elect{term.Leader, term}
		return g.work(0, 0)(ctx, term)
	}
	rb := run(ctx, t, b, false, blocks)
	elected(ctx, t, "b campaigns to resign", ch)
	noError(t, "b resigns", b.Resign(ctx))
	noError(t, "b's Run after Resign", rb.wait(ctx, t, "b's Run"))

	rb = run(ctx, t, b, false, blocks)
	elected(ctx, t, "b campaigns to crash", ch)
	ra := run(ctx, t, a, true, blocks)
	sleepCtx(ctx, s.h.TTL/4)
	_ = lb.Close() // b crashes: its lease expires; a takes over
	elected(ctx, t, "a after b's crash", ch)
	if err := rb.wait(ctx, t, "b's Run after its Locker closed"); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("b's Run after its Locker was closed returned %v; want an error matching lease.ErrClosed", err)
	}
	ra.cancel()
	noError(t, "a's Lead, ended by its context", ra.wait(ctx, t, "a's Lead"))

	for i := 1; i < len(numbers); i++ {
		if numbers[i] <= numbers[i-1] {
			t.Errorf("term numbers %v do not strictly increase", numbers)
			break
		}
	}
	if len(numbers) != 6 {
		t.Errorf("%d terms recorded (%v); want 6", len(numbers), numbers)
	}
	g.check(t)
}

// resignHandsOff: three candidates run; three times, the leader resigns
// while the others wait, and its Work (which takes a quarter ttl to wind
// down) has returned before the next leader's Work starts. Resign and
// the resigned Run return nil, and the Work's context ends with
// ErrResigned.
func resignHandsOff(ctx context.Context, t *testing.T, s *suite) {
	handoff(ctx, t, s, "resign", func(ctx context.Context, c *election.Candidate, r *running) error {
		if err := c.Resign(ctx); err != nil {
			return fmt.Errorf("resign: %w", err)
		}
		return r.wait(ctx, t, "the resigned Run")
	}, election.ErrResigned)
}

// contextEndHandsOff: as resignHandsOff, with the leader's Run ended by
// cancelling its context.
func contextEndHandsOff(ctx context.Context, t *testing.T, s *suite) {
	handoff(ctx, t, s, "cancel", func(ctx context.Context, c *election.Candidate, r *running) error {
		r.cancel()
		return r.wait(ctx, t, "the cancelled Run")
	}, context.Canceled)
}

// handoff runs three candidates and, three times, ends the leader's Run
// with end, expecting its Work's context to end with cause.
func handoff(ctx context.Context, t *testing.T, s *suite, label string, end func(context.Context, *election.Candidate, *running) error, cause error) {
	office := s.office(label)
	g := s.newLedger(office)
	windDown := s.h.TTL / 4
	ch := make(chan elect, 16)
	cands := map[string]*election.Candidate{}
	runs := map[string]*running{}
	for _, id := range []string{"a", "b", "c"} {
		c, _ := s.candidate(t, office, id, newEvents(id, ch).options()...)
		cands[id] = c
		runs[id] = run(ctx, t, c, false, g.work(0, windDown))
	}
	var ended []uint64
	e := elected(ctx, t, "the first leader", ch)
	for round := range 3 {
		sleepCtx(ctx, s.h.TTL/4) // the others settle into waiting
		if err := end(ctx, cands[e.who], runs[e.who]); err != nil {
			t.Errorf("round %d: ending %s's term %d: %v", round, e.who, e.term.Number, err)
		}
		ended = append(ended, e.term.Number)
		next := elected(ctx, t, fmt.Sprintf("round %d: after %s's term", round, e.who), ch)
		runs[e.who] = run(ctx, t, cands[e.who], false, g.work(0, windDown)) // it stands by again
		e = next
	}
	for _, r := range runs {
		r.cancel()
	}
	for id, r := range runs {
		if err := r.wait(ctx, t, id+"'s Run"); err != nil {
			t.Errorf("%s's Run, cancelled at the end: %v", id, err)
		}
	}
	spans := g.check(t)
	for _, n := range ended {
		sp, ok := g.find(n)
		switch {
		case !ok || !sp.ended:
			t.Errorf("term %d was ended by %s but its work never recorded its end", n, label)
		case !errors.Is(sp.cause, cause):
			t.Errorf("term %d ended by %s: its work's context ended with cause %v; want %v", n, label, sp.cause, cause)
		}
	}
	t.Logf("handoffs (end of the old work to start of the new, work winding down for %s): %s", windDown, handoffs(spans))
}

// closedLeaderReplaced: the leader's Locker is closed without releasing,
// as a crash would leave it; the standby candidate leads within the ttl
// plus the expiry lag, after the dead leader's Work was cancelled (at its
// Deadline), and the dead leader's Run returns ErrClosed.
func closedLeaderReplaced(ctx context.Context, t *testing.T, s *suite) {
	office := s.office("crash")
	g := s.newLedger(office)
	ch := make(chan elect, 4)
	a, la := s.candidate(t, office, "a", newEvents("a", ch).options()...)
	ra := run(ctx, t, a, false, g.work(0, 0))
	ea := elected(ctx, t, "a", ch)
	b, _ := s.candidate(t, office, "b", newEvents("b", ch).options()...)
	rb := run(ctx, t, b, false, g.work(0, 0))
	sleepCtx(ctx, s.h.TTL/3)

	closed := time.Now()
	_ = la.Close()
	eb := elected(ctx, t, "b after a's crash", ch)
	if eb.who != "b" || eb.term.Number <= ea.term.Number {
		t.Fatalf("after a's term %d, %s was elected with term %d; want b with a larger term", ea.term.Number, eb.who, eb.term.Number)
	}
	if err := ra.wait(ctx, t, "a's Run after its Locker closed"); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("a's Run after its Locker was closed returned %v; want an error matching lease.ErrClosed", err)
	}
	rb.cancel()
	noError(t, "b's Run", rb.wait(ctx, t, "b's Run"))
	spans := g.check(t)
	sa, _ := g.find(ea.term.Number)
	sb, _ := g.find(eb.term.Number)
	if !errors.Is(sa.cause, lease.ErrLost) {
		t.Errorf("a's work ended with cause %v; want an error matching lease.ErrLost (its Deadline passed without renewal)", sa.cause)
	}
	took := sb.start.Sub(closed)
	if bound := s.h.replaceBound(); took > bound {
		t.Errorf("b led %s after a's Locker was closed; want within %s (ttl %s + expiry lag %s + slack)", took, bound, s.h.TTL, s.h.ExpiryLag)
	}
	t.Logf("b led %s after a's Locker was closed (ttl %s); a's work stopped %s after the close; handoffs %s",
		took.Round(time.Millisecond), s.h.TTL, sa.end.Sub(closed).Round(time.Millisecond), handoffs(spans))
}

// observerSequence: an observer follows the office through vacancy, a
// leader with metadata, a resignation, a crash and a Work that returns;
// it reports "no leader" each time there is none, every term, and no term
// older than one it reported.
func observerSequence(ctx context.Context, t *testing.T, s *suite) {
	office := s.office("observe")
	g := s.newLedger(office)
	obsL := s.locker(t)
	type seen struct {
		term election.Term
		err  error
	}
	obs := make(chan seen, 256)
	octx, ostop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for term, err := range election.Observe(octx, obsL, office) {
			obs <- seen{term, err}
		}
	}()
	defer func() { ostop(); <-done }()

	var all []election.Term
	next := func(what string, want func(election.Term) bool) election.Term {
		t.Helper()
		timer := time.NewTimer(3*s.h.replaceBound() + 5*time.Second)
		defer timer.Stop()
		for {
			select {
			case got := <-obs:
				if got.err != nil {
					t.Errorf("Observe yielded a store error: %v", got.err)
					continue
				}
				all = append(all, got.term)
				if want(got.term) {
					return got.term
				}
			case <-timer.C:
				t.Fatalf("waiting for the observer to report %s; it reported %v", what, all)
			}
		}
	}
	leader := func(id string) func(election.Term) bool {
		return func(t election.Term) bool { return t.Leader == id }
	}
	vacant := func(t election.Term) bool { return t.Vacant() }

	first := next("the office vacant", vacant)
	if len(all) != 1 || first.Office != office {
		t.Errorf("the observer's first report was %v; want the vacant office %q", all, office)
	}

	a, _ := s.candidate(t, office, "a", election.WithMetadata("a-meta"))
	ra := run(ctx, t, a, false, g.work(0, 0))
	ta := next("a leading", leader("a"))
	if ta.Metadata != "a-meta" {
		t.Errorf("the observer reported a's term with metadata %q; want %q", ta.Metadata, "a-meta")
	}
	// The store shows a as leader as soon as it is elected; its work starts
	// a moment later. Resign once it has, so that the term is led.
	g.waitBegun(t, "a")
	noError(t, "a resigns", a.Resign(ctx))
	noError(t, "a's Run", ra.wait(ctx, t, "a's Run"))
	next("the office vacant after a resigned", vacant)

	b, lb := s.candidate(t, office, "b")
	rb := run(ctx, t, b, false, g.work(0, 0))
	next("b leading", leader("b"))
	g.waitBegun(t, "b")
	_ = lb.Close()
	next("the office vacant after b crashed", vacant)
	_ = rb.wait(ctx, t, "b's Run")

	c, _ := s.candidate(t, office, "c")
	rc := run(ctx, t, c, true, g.work(s.h.TTL+election.DefaultPollInterval, 0)) // long enough for a backed-off observer to see it
	next("c leading", leader("c"))
	next("the office vacant after c's work returned", vacant)
	noError(t, "c's Lead", rc.wait(ctx, t, "c's Lead"))

	ostop()
	<-done
	close(obs)
	for got := range obs {
		if got.err == nil {
			all = append(all, got.term)
		}
	}
	var highest uint64
	for i, term := range all {
		switch {
		case i > 0 && term.Vacant() && all[i-1].Vacant():
			t.Errorf("report %d: \"no leader\" twice in a row: %v", i, all)
		case !term.Vacant() && term.Number < highest:
			t.Errorf("report %d: term %d after term %d: the observer went back: %v", i, term.Number, highest, all)
		case !term.Vacant() && i > 0 && term.Number == highest && !all[i-1].Vacant():
			t.Errorf("report %d: term %d reported twice in a row: %v", i, term.Number, all)
		}
		highest = max(highest, term.Number)
	}
	spans := g.check(t)
	if len(spans) != 3 {
		t.Errorf("%d terms were led; want 3: %+v", len(spans), spans)
	}
	t.Logf("the observer reported %v", all)
}

// callbacksPair: three candidates; leaders resign, a standing-by
// candidate's context ends, a leader crashes. Each candidate's callbacks
// alternate started(n), stopped(n), only for the terms it led, and the
// crashed leader's stop reports lost leadership.
func callbacksPair(ctx context.Context, t *testing.T, s *suite) {
	office := s.office("callbacks")
	g := s.newLedger(office)
	ch := make(chan elect, 64)
	ids := []string{"a", "b", "c"}
	cands := map[string]*election.Candidate{}
	lockers := map[string]lease.Locker{}
	evs := map[string]*events{}
	runs := map[string]*running{}
	for _, id := range ids {
		evs[id] = newEvents(id, ch)
		cands[id], lockers[id] = s.candidate(t, office, id, evs[id].options()...)
		runs[id] = run(ctx, t, cands[id], false, g.work(0, 0))
	}
	e := elected(ctx, t, "the first leader", ch)
	for round := range 4 {
		sleepCtx(ctx, s.h.TTL/5)
		noError(t, fmt.Sprintf("round %d: %s resigns", round, e.who), cands[e.who].Resign(ctx))
		next := elected(ctx, t, fmt.Sprintf("round %d: after %s resigned", round, e.who), ch)
		runs[e.who] = run(ctx, t, cands[e.who], false, g.work(0, 0))
		e = next
	}

	// A candidate that is only campaigning leaves: no callback may fire
	// for it (kubernetes#23731, client-go#1187).
	standby := ids[0]
	if standby == e.who {
		standby = ids[1]
	}
	before := len(evs[standby].snapshot())
	if _, leading := cands[standby].Leading(); leading {
		t.Fatalf("%s reports leading while %s was elected", standby, e.who)
	}
	runs[standby].cancel()
	noError(t, standby+"'s Run, cancelled while standing by", runs[standby].wait(ctx, t, standby+"'s Run"))
	if got := evs[standby].snapshot(); len(got) != before {
		t.Errorf("%s's context ended while it stood by, and its callbacks fired: %v", standby, got[before:])
	}

	// The leader crashes: its stop callback reports lost leadership.
	crashed := e.who
	_ = lockers[crashed].Close()
	elected(ctx, t, "after the crash", ch)
	if err := runs[crashed].wait(ctx, t, crashed+"'s Run"); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("%s's Run after its Locker was closed returned %v; want an error matching lease.ErrClosed", crashed, err)
	}
	if got := evs[crashed].snapshot(); len(got) == 0 || got[len(got)-1].started || !errors.Is(got[len(got)-1].err, lease.ErrLost) {
		t.Errorf("%s crashed as leader; its last callback was %v; want a stop with an error matching lease.ErrLost", crashed, got)
	}
	for _, r := range runs {
		r.cancel()
	}
	for id, r := range runs {
		_ = r.wait(ctx, t, id+"'s Run")
	}

	spans := g.check(t)
	led := map[string][]uint64{}
	for _, sp := range spans {
		led[sp.leader] = append(led[sp.leader], sp.term)
	}
	total := 0
	for _, id := range ids {
		list := evs[id].snapshot()
		var starts []uint64
		for i, ev := range list {
			switch {
			case i%2 == 0 && !ev.started:
				t.Errorf("%s: callback %d is a stop without a start: %v", id, i, list)
			case i%2 == 1 && (ev.started || ev.term.Number != list[i-1].term.Number):
				t.Errorf("%s: callback %d does not stop the term callback %d started: %v", id, i, i-1, list)
			case ev.started:
				starts = append(starts, ev.term.Number)
			}
		}
		if len(list)%2 != 0 {
			t.Errorf("%s: %d callbacks, a start without a stop: %v", id, len(list), list)
		}
		if fmt.Sprint(starts) != fmt.Sprint(led[id]) {
			t.Errorf("%s: started callbacks for terms %v; its work led terms %v", id, starts, led[id])
		}
		total += len(starts)
	}
	if total != len(spans) || total < 6 {
		t.Errorf("%d started callbacks for %d terms; want one per term, at least 6", total, len(spans))
	}
}

// metadataPublished: the leader's ID and metadata reach observers exactly,
// in the documented owner encoding, up to the longest metadata that fits;
// a longer one is refused; a lease taken by a program that does not use
// the package is reported with its owner as the leader.
func metadataPublished(ctx context.Context, t *testing.T, s *suite) {
	office := s.office("metadata")
	reader := s.locker(t)
	owner := regexp.MustCompile(`^([^ ]+) [0-9a-f]{12}(?: (.*))?$`)
	check := func(id, md string) {
		t.Helper()
		c, _ := s.candidate(t, office, id, election.WithMetadata(md))
		err := c.Lead(ctx, func(ctx context.Context, term election.Term) error {
			cur, err := election.Current(ctx, reader, office)
			if err != nil {
				return err
			}
			m := owner.FindStringSubmatch(cur.Owner)
			switch {
			case cur.Leader != id || cur.Metadata != md || cur.Number != term.Number:
				t.Errorf("Current reads leader %q, metadata %q, term %d; want %q, %q, %d", cur.Leader, cur.Metadata, cur.Number, id, md, term.Number)
			case m == nil || m[1] != id || m[2] != md:
				t.Errorf("the lease owner %q is not ID, a space, 12 hex digits and, after a space, the metadata", cur.Owner)
			case term.Owner != cur.Owner || term.Metadata != md || term.Leader != id:
				t.Errorf("the leader's Term %+v disagrees with the store's %+v", term, cur)
			}
			for got, err := range election.Observe(ctx, reader, office) {
				if err != nil || got.Metadata != md || got.Leader != id {
					t.Errorf("Observe's first report: %v, %v; want leader %q with metadata %q", got, err, id, md)
				}
				break
			}
			return nil
		})
		noError(t, "Lead with metadata "+fmt.Sprintf("%.20q", md), err)
	}
	check("node-a", "10.0.0.5:8080 zone=b ü")
	check("node-b", "")
	longest := strings.Repeat("m", lease.MaxOwnerLen-len("n")-1-12-1)
	check("n", longest)
	if _, err := election.NewCandidate(reader, office, election.WithID("n"), election.WithMetadata(longest+"m")); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("NewCandidate with metadata one byte too long: %v; want an error matching lease.ErrInvalid", err)
	}

	foreign := "host:123:abcdef:1"
	held, err := reader.Acquire(ctx, office, foreign, s.h.TTL)
	if err != nil {
		t.Fatalf("Acquire as a program outside the package: %v", err)
	}
	cur, err := election.Current(ctx, reader, office)
	if err != nil || cur.Leader != foreign || cur.Metadata != "" || cur.Number != held.Token {
		t.Errorf("Current of a lease owned by %q: %+v, %v; want that owner as the leader, no metadata, term %d", foreign, cur, err, held.Token)
	}
	noError(t, "Release", reader.Release(ctx, held))
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// incumbentStays: a leader keeps the office for three ttls, renewing,
// while three other candidates campaign and wait; none of them starts a
// term in that time. A store that grants the office again while its
// holder keeps renewing (a renewal that does not reach the store, or
// one the store does not count) lets a second leader start about a ttl
// after the first. If the leader's own term ends instead (a renewal that
// landed too late on a loaded machine: the Deadline passed, the work was
// cancelled with lease.ErrLost), the promise was kept but the case could
// not test it: it says so, with the timings, and skips.
func incumbentStays(ctx context.Context, t *testing.T, s *suite) {
	const ttls = 3
	office := s.office("incumbent")
	g := s.newLedger(office)
	ch := make(chan elect, 16)
	a, _ := s.candidate(t, office, "a", newEvents("a", ch).options()...)
	seen := &renewals{}
	ra := run(ctx, t, a, false, g.renewingWork(seen, s.h.TTL/10))
	ea := elected(ctx, t, "a, alone", ch)
	g.waitBegun(t, "a")
	var others []*running
	for _, id := range []string{"b", "c", "d"} {
		c, _ := s.candidate(t, office, id, newEvents(id, ch).options()...)
		others = append(others, run(ctx, t, c, false, g.work(0, 0)))
	}
	hold := ttls * s.h.TTL
	// Times are from the start of a's work: its office.
	from := time.Now()
	if sa, ok := g.find(ea.term.Number); ok {
		from = sa.start
	}
	timer := time.NewTimer(hold - time.Since(from))
	var second *elect
	var secondAt time.Time
	select {
	case e := <-ch:
		second, secondAt = &e, time.Now()
	case <-timer.C:
	case <-ctx.Done():
	}
	timer.Stop()
	held := time.Since(from)
	_, leading := a.Leading()
	for _, r := range others {
		r.cancel()
		_ = r.wait(ctx, t, "a standing-by candidate's Run")
	}
	ra.cancel()
	_ = ra.wait(ctx, t, "a's Run")
	timings := func() string {
		return fmt.Sprintf("ttl %s, expiry lag %s, holding for %d ttls; %s", s.h.TTL, s.h.ExpiryLag, ttls, seen.describe(from))
	}
	rel := func(t time.Time) string { return t.Sub(from).Round(time.Millisecond).String() }
	spans := g.check(t)
	sa, _ := g.find(ea.term.Number)
	// How a's term ended, if it did before the case ended it: lost when
	// its Deadline passed (a renewal too late: no broken promise), or
	// found lost before the last Deadline its work saw while it lasted
	// (the store took back a tenure renewed in time).
	lost := sa.ended && errors.Is(sa.cause, lease.ErrLost)
	lostEarly := lost && sa.end.Before(seen.last())
	couldNotTest := func(what string) {
		t.Skipf("could not test: a's term %d was lost %s into its office, when its Deadline passed before a renewal landed (%s); %s. No promise was broken; give the Harness a longer TTL on this machine",
			ea.term.Number, rel(sa.stopped()), timings(), what)
	}
	earlyLoss := func(what string) {
		t.Errorf("a's lease was found lost %s into its office, %s before the Deadline (%s) its work last saw: the store ended a tenure whose Deadline had not come; %s; %s",
			rel(sa.end), seen.last().Sub(sa.end).Round(time.Millisecond), rel(seen.last()), what, timings())
	}
	if second == nil {
		switch {
		case ctx.Err() != nil:
			t.Fatalf("the case's timeout ended it %s into a's office: %s", held.Round(time.Millisecond), timings())
		case lostEarly:
			earlyLoss("nobody else was elected before the hold ended")
		case lost:
			couldNotTest("nobody else was elected before the hold ended")
		case !leading:
			t.Errorf("a was no longer leading %s into its office, its work having ended with %v, and nobody else was elected: %s", held.Round(time.Millisecond), sa.cause, timings())
		default:
			t.Logf("a led term %d alone for %s while b, c and d waited: %s", ea.term.Number, held.Round(time.Millisecond), timings())
		}
		return
	}
	// Somebody started a term while a should have been in office.
	sb, _ := g.find(second.term.Number)
	next := fmt.Sprintf("%s was elected with term %d %s into a's office", second.who, second.term.Number, rel(secondAt))
	if !sb.start.IsZero() {
		next += fmt.Sprintf(", its work starting at %s", rel(sb.start))
	}
	switch {
	case t.Failed():
		// The ledger found two leaders at once: say when it happened.
		t.Errorf("%s, while a was renewing term %d: %s", next, ea.term.Number, timings())
	case lostEarly:
		earlyLoss(next)
	case lost:
		couldNotTest(next)
	default:
		t.Errorf("%s, a's work having ended with %v: a leader that keeps renewing must keep the office; %s; handoffs %s",
			next, sa.cause, timings(), handoffs(spans))
	}
}
