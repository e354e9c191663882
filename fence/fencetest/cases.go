package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
)

// staleRefused tests that a token smaller than the maximum is refused, by
// Write and by Check, with a *StaleError naming the winner.
func staleRefused(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	name, key := s.name("stale"), s.key("stale")
	write(ctx, t, tg, name, 10, key, "by 10")
	mustBeStale(t, "Write", tg.Write(ctx, name, 5, key, "by 5"), name, 5, 10)
	mustBeStale(t, "Check", tg.Check(ctx, name, 9), name, 9, 10)
	mustBeStale(t, "Write", tg.Write(ctx, name, 1, key, "by 1"), name, 1, 10)
	mustRead(ctx, t, tg, key, "by 10", true, "after stale writes")
}

// equalAccepted tests that the holder of the maximum can write again and
// again: equal tokens are accepted.
func equalAccepted(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	name, key := s.name("equal"), s.key("equal")
	write(ctx, t, tg, name, 10, key, "first")
	write(ctx, t, tg, name, 10, key, "second")
	if err := tg.Check(ctx, name, 10); err != nil {
		t.Fatalf("Check with the token of the maximum should be accepted: %v", err)
	}
	write(ctx, t, tg, name, 10, key, "third")
	mustRead(ctx, t, tg, key, "third", true, "after three writes with one token")
}

// higherRemembered tests that a larger token is accepted and becomes the
// maximum that later writes are held to.
func higherRemembered(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	name, key := s.name("higher"), s.key("higher")
	write(ctx, t, tg, name, 10, key, "by 10")
	write(ctx, t, tg, name, 20, key, "by 20")
	mustBeStale(t, "Write", tg.Write(ctx, name, 15, key, "by 15"), name, 15, 20)
	mustBeStale(t, "Check", tg.Check(ctx, name, 19), name, 19, 20)
	write(ctx, t, tg, name, 21, key, "by 21")
	mustBeStale(t, "Write", tg.Write(ctx, name, 20, key, "by 20 again"), name, 20, 21)
	mustRead(ctx, t, tg, key, "by 21", true, "after writes by 10, 20, 21")
}

// refusedChangesNothing tests that a refused write neither writes its data
// (to an item written before, or to a new one) nor moves the maximum.
func refusedChangesNothing(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	name, k1, k2 := s.name("nothing"), s.key("written"), s.key("untouched")
	write(ctx, t, tg, name, 10, k1, "new")
	mustBeStale(t, "Write", tg.Write(ctx, name, 5, k1, "stale"), name, 5, 10)
	mustRead(ctx, t, tg, k1, "new", true, "a refused write overwrote the item")
	mustBeStale(t, "Write", tg.Write(ctx, name, 5, k2, "stale"), name, 5, 10)
	mustRead(ctx, t, tg, k2, "", false, "a refused write created the item")
	// Had a refusal lowered the maximum to 5, 7 would now pass.
	mustBeStale(t, "Write after refusals", tg.Write(ctx, name, 7, k2, "stale"), name, 7, 10)
	mustRead(ctx, t, tg, k2, "", false, "a refused write created the item")
	write(ctx, t, tg, name, 10, k2, "by 10")
}

// checkRaises tests that Check and Write share one maximum per name:
// an accepted Check refuses a smaller Write, and the other way round.
func checkRaises(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	name, key := s.name("check"), s.key("check")
	if err := tg.Check(ctx, name, 30); err != nil {
		t.Fatalf("Check(token 30) of a new name: %v", err)
	}
	mustBeStale(t, "Write after Check(30)", tg.Write(ctx, name, 20, key, "by 20"), name, 20, 30)
	mustRead(ctx, t, tg, key, "", false, "a write refused after Check")
	write(ctx, t, tg, name, 30, key, "by 30")
	write(ctx, t, tg, name, 40, key, "by 40")
	mustBeStale(t, "Check after Write(40)", tg.Check(ctx, name, 35), name, 35, 40)
}

// firstAccepted tests that a name nobody wrote accepts any valid token,
// the smallest and the largest.
func firstAccepted(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	write(ctx, t, tg, s.name("first-1"), 1, s.key("first-1"), "by 1")
	write(ctx, t, tg, s.name("first-max"), fence.MaxToken, s.key("first-max"), "by max")
	if err := tg.Check(ctx, s.name("first-check"), 1); err != nil {
		t.Fatalf("Check(token 1) of a new name: %v", err)
	}
	name := s.name("max")
	write(ctx, t, tg, name, fence.MaxToken, s.key("max"), "by max")
	write(ctx, t, tg, name, fence.MaxToken, s.key("max"), "by max again")
	mustBeStale(t, "Write", tg.Write(ctx, name, fence.MaxToken-1, s.key("max"), "below max"), name, fence.MaxToken-1, fence.MaxToken)
}

// largeTokens tests that tokens are compared as integers, not as floats
// (which cannot tell 2^53 from 2^53+1) nor as strings ("9" > "10").
func largeTokens(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	const big = 1 << 53
	name, key := s.name("large"), s.key("large")
	// A float64 rounds 2^53+1 to 2^53, and 2^62+1 to 2^62.
	write(ctx, t, tg, name, big+1, key, "by 2^53+1")
	mustBeStale(t, "Write", tg.Write(ctx, name, big, key, "by 2^53"), name, big, big+1)
	mustBeStale(t, "Check", tg.Check(ctx, name, big), name, big, big+1)
	write(ctx, t, tg, name, 1<<62+1, key, "by 2^62+1")
	mustBeStale(t, "Write", tg.Write(ctx, name, 1<<62, key, "by 2^62"), name, 1<<62, 1<<62+1)

	name, key = s.name("digits"), s.key("digits")
	write(ctx, t, tg, name, 9, key, "by 9")
	write(ctx, t, tg, name, 10, key, "by 10")
	mustBeStale(t, "Write", tg.Write(ctx, name, 9, key, "by 9 again"), name, 9, 10)
	write(ctx, t, tg, name, 100, key, "by 100")
	mustBeStale(t, "Write", tg.Write(ctx, name, 99, key, "by 99"), name, 99, 100)
	mustRead(ctx, t, tg, key, "by 100", true, "after writes by 9, 10, 100")
}

// awkward are name suffixes that stores tend to conflate: case, trailing
// spaces, Unicode normalization and collation, key separators, hash-tag
// braces, NUL and other control bytes, SQL and glob metacharacters,
// percent signs (the HTTP encoding's escape).
var awkward = []string{
	"a", "A", "a ", " a", "a\t", "ß", "ss", "é", "e\u0301", "İ", "i",
	"a/b", "a:b", "a.b", "a|b", "{a}", "a{b}c", "{", "}", "{}", "}{",
	"a\x00b", "a\x00", "a\nb", "a\rb", "\x7f", "\x01",
	"a%", "a%20", "a%2", "a_", "a*", "a?", "a[b]", "a'b", `a"b`, `a\b`, "a;b--",
	"日本語", "🙂", "\u200b", "\uFEFFa",
}

// keptApart writes to each name with decreasing tokens: if any name
// shared a maximum with an earlier one, its smaller token is refused.
func keptApart(ctx context.Context, t *testing.T, s *suite, tg Target, names []string) {
	t.Helper()
	for i, name := range names {
		token := uint64(1000 - i)
		key := s.key(fmt.Sprintf("apart-%d", i))
		if err := tg.Write(ctx, name, token, key, "v"); err != nil {
			t.Fatalf("Write(%s, token %d), after writes with larger tokens to other names only: %v (do two names share a fence?)", short(name), token, err)
		}
		if err := tg.Check(ctx, name, token); err != nil {
			t.Fatalf("Check(%s, token %d): %v", short(name), token, err)
		}
	}
	// And each name kept its own maximum.
	for i, name := range names {
		token := uint64(1000 - i)
		if token > 1 {
			mustBeStale(t, "Write below the name's own maximum", tg.Write(ctx, name, token-1, s.key("apart-again"), "v"), name, token-1, token)
		}
	}
}

// awkwardNames tests that names stores tend to conflate keep separate
// maxima.
func awkwardNames(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	base := s.name("")
	names := make([]string, len(awkward))
	for i, suffix := range awkward {
		names[i] = base + suffix
	}
	keptApart(ctx, t, s, tg, names)
}

// longNames tests that names of up to 1024 bytes are never truncated: names
// differing only after their first 1000 bytes keep separate maxima.
func longNames(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	base := s.name("")
	base += strings.Repeat("p", 1000-len(base))
	var names []string
	for i := 0; i < 8; i++ {
		suffix := fmt.Sprintf("%024d", i) // names of exactly 1024 bytes
		if i%2 == 1 {
			suffix = suffix[:len(suffix)-1-i] // and a few shorter ones
		}
		names = append(names, base+suffix)
	}
	names = append(names, base+strings.Repeat("\x00", 24), base+strings.Repeat("}", 24))
	keptApart(ctx, t, s, tg, names)
}

// op is one guarded write of the concurrency case.
type op struct {
	round      int
	token      uint64
	start, end time.Time
	accepted   bool
	max        uint64 // StaleError.Max when refused
}

// concurrentWriters tests writers racing on one name with interleaved
// tokens: the store must act as if the writes happened one at a time.
//
// The case runs in rounds (Harness.Writes of them). In each, every writer
// (Harness.Writers, each on its own Target) waits at a gate that opens for
// all at once, then makes one guarded write. The tokens of round r are the
// numbers r*W+1 to r*W+W (W writers) dealt out in a random order, so the
// writers' tokens interleave differently in every round; after the first
// round some writers instead present a straggler, a token below the
// largest of the round before. Once a round's writers have all returned,
// what a store that checks and writes in one step must show is exact:
// the round's largest token (larger than any presented before) was
// accepted, every straggler was refused, the data holds the largest
// token's write, and the maximum is that token. A checker that checks,
// then writes without holding anything, lets the writes of one round land
// in any order, and the largest is the last to land about once in W
// rounds, so that such a checker lasts a whole run of 25 rounds with odds
// of about (1/W)^25 (the toys in this package's tests are caught in
// every run, most in the first round).
func concurrentWriters(ctx context.Context, t *testing.T, s *suite) {
	name, key := s.name("concurrent"), s.key("concurrent")
	writers, rounds := s.h.Writers, s.h.Writes
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 32))
	targets := make([]Target, writers)
	for w := range targets {
		targets[w] = s.target(t)
	}
	// done is the largest token of the writes accepted so far.
	var done atomic.Uint64
	var ops []op
	var prev uint64 // the largest token of the round before
	began := time.Now()
	for r := range rounds {
		top := uint64((r + 1) * writers)
		tokens := make([]uint64, writers)
		for w, i := range rng.Perm(writers) {
			tokens[w] = uint64(r*writers + 1 + i)
			if prev > 1 && tokens[w] != top && rng.IntN(4) == 0 {
				tokens[w] = 1 + rng.Uint64N(prev-1) // a straggler from far behind
			}
		}
		round := make([]op, writers)
		errs := make([]error, writers)
		var ready, finished sync.WaitGroup
		gate := make(chan struct{})
		for w := range writers {
			ready.Add(1)
			finished.Add(1)
			go func() {
				defer finished.Done()
				ready.Done()
				<-gate
				round[w], errs[w] = guardedWrite(ctx, targets[w], name, key, r, tokens[w], &done)
			}()
		}
		ready.Wait()
		close(gate)
		finished.Wait()
		at := fmt.Sprintf("round %d of %d (tokens %v, released together %s into the case; seed %d)", r+1, rounds, tokens, time.Since(began).Round(time.Millisecond), seed)
		for _, err := range errs {
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
		}
		var accepted []uint64
		for _, o := range round {
			switch {
			case o.accepted:
				accepted = append(accepted, o.token)
			case o.token == top:
				t.Fatalf("%s: token %d, the largest presented so far, was refused in favour of %d", at, top, o.max)
			}
			if o.accepted && o.token < prev {
				t.Fatalf("%s: the straggler token %d was accepted after token %d had been accepted in the round before", at, o.token, prev)
			}
		}
		// Every writer has returned: the largest token's write is the one
		// the data shows, and the maximum is that token.
		v, ok, err := targets[0].Read(ctx, key)
		switch {
		case err != nil:
			t.Fatalf("%s: Read after the round: %v", at, err)
		case !ok || v != strconv.FormatUint(top, 10):
			t.Fatalf("%s: once every writer had returned, with tokens %v accepted, the item holds %q (found %v); want the write of token %d, the largest: a write with a smaller token landed after it (the check, the write and the raise of the maximum are not one step)", at, accepted, v, ok, top)
		}
		if top > 1 {
			mustBeStale(t, at+": Check just below the round's largest token", targets[0].Check(ctx, name, top-1), name, top-1, top)
		}
		ops = append(ops, round...)
		prev = top
	}
	checkOrder(t, ops)
	maxAccepted := prev
	tg := s.target(t)
	mustRead(ctx, t, tg, key, strconv.FormatUint(maxAccepted, 10), true, "after the concurrent writes")
	mustBeStale(t, "Write after the concurrent writes", tg.Write(ctx, name, maxAccepted-1, key, "late"), name, maxAccepted-1, maxAccepted)
	if err := tg.Check(ctx, name, maxAccepted); err != nil {
		t.Fatalf("Check with the largest accepted token %d: %v", maxAccepted, err)
	}
	n := 0
	for _, o := range ops {
		if o.accepted {
			n++
		}
	}
	t.Logf("%d rounds of %d writers released together: %d of %d writes accepted, largest token %d, in %s (seed %d)", rounds, writers, n, len(ops), maxAccepted, time.Since(began).Round(time.Millisecond), seed)
}

// guardedWrite makes one write of the concurrency case's round r, which
// sets key to token, and says how it went. Right after an accepted write
// it reads key, which must then hold the largest token accepted so far
// (done, raised to token) or a larger one.
func guardedWrite(ctx context.Context, tg Target, name, key string, r int, token uint64, done *atomic.Uint64) (op, error) {
	o := op{round: r, token: token, start: time.Now()}
	err := tg.Write(ctx, name, token, key, strconv.FormatUint(token, 10))
	o.end = time.Now()
	var se *fence.StaleError
	switch {
	case err == nil:
		o.accepted = true
		// Once writes are accepted, the data holds the largest of their
		// tokens or a larger one for good: a smaller token's write
		// landing after them means the check and the write were two
		// steps.
		return o, readAtLeast(ctx, tg, key, raiseTo(done, token))
	case errors.As(err, &se):
		if se.Name != name || se.Token != token {
			return o, fmt.Errorf("a refusal of token %d for %s named token %d for %s", token, short(name), se.Token, short(se.Name))
		}
		o.max = se.Max
		return o, nil
	}
	return o, fmt.Errorf("Write(token %d): %w", token, err)
}

// checkOrder fails t unless the concurrency case's writes, ops, are
// consistent with one order of the writes that respects real time: every
// refusal names a larger token that was accepted, and no write that began
// after an accepted write of token a had ended was accepted with a
// smaller token or refused in favour of one.
func checkOrder(t *testing.T, ops []op) {
	t.Helper()
	acceptedTokens := map[uint64]bool{}
	var accepted []op
	for _, o := range ops {
		if o.accepted {
			acceptedTokens[o.token] = true
			accepted = append(accepted, o)
		}
	}
	for _, o := range ops {
		if !o.accepted && (o.max <= o.token || !acceptedTokens[o.max]) {
			t.Fatalf("round %d: token %d was refused in favour of token %d, which is not larger or was never accepted (accepted: %v)", o.round+1, o.token, o.max, sortedKeys(acceptedTokens))
		}
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].end.Before(accepted[j].end) })
	for _, b := range ops {
		// The largest token accepted by writes that ended before b began.
		var floor uint64
		for _, a := range accepted {
			if !a.end.Before(b.start) {
				break
			}
			floor = max(floor, a.token)
		}
		switch {
		case b.accepted && b.token < floor:
			t.Fatalf("round %d: token %d was accepted after a write with token %d had been accepted: the accepted sequence went down", b.round+1, b.token, floor)
		case !b.accepted && b.max < floor:
			t.Fatalf("round %d: token %d was refused in favour of %d after token %d had been accepted: the maximum went down", b.round+1, b.token, b.max, floor)
		}
	}
}

// raiseTo raises m to token if it is below, and returns m.
func raiseTo(m *atomic.Uint64, token uint64) uint64 {
	for {
		cur := m.Load()
		if cur >= token || m.CompareAndSwap(cur, token) {
			return max(cur, token)
		}
	}
}

// readAtLeast reads key, which writes of the concurrency case set to
// their token, once writes up to token were accepted, and says what is
// wrong when it holds no token or a smaller one.
func readAtLeast(ctx context.Context, tg Target, key string, token uint64) error {
	v, ok, err := tg.Read(ctx, key)
	switch {
	case err != nil:
		return fmt.Errorf("a read after writes up to token %d were accepted: %v", token, err)
	case !ok:
		return fmt.Errorf("a read after writes up to token %d were accepted found the item missing", token)
	}
	got, err := strconv.ParseUint(v, 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("a read after writes up to token %d were accepted returned %q, which no writer wrote", token, v)
	case got < token:
		return fmt.Errorf("after writes up to token %d had been accepted, the item held the write of token %d: a write with a smaller token landed after a larger one (the check, the write and the raise of the maximum are not one step)", token, got)
	}
	return nil
}

func sortedKeys(m map[uint64]bool) []uint64 {
	var ks []uint64
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// newConnection tests that the maximum lives in the store: a Target made
// afterwards (a new connection, a new process) is held to it, whether it
// was raised by a guarded write or by Check alone, and exactly when it is
// above 2^53.
func newConnection(ctx context.Context, t *testing.T, s *suite) {
	name, key := s.name("reconnect"), s.key("reconnect")
	write(ctx, t, s.target(t), name, 10, key, "by 10")
	list := raiseMaxima(ctx, t, s, s.target(t), "reconnect")
	other := s.target(t)
	mustBeStale(t, "Write through a new Target", other.Write(ctx, name, 5, key, "by 5"), name, 5, 10)
	mustBeStale(t, "Check through a new Target", other.Check(ctx, name, 9), name, 9, 10)
	heldTo(ctx, t, s, other, list, "through a new Target")
	write(ctx, t, other, name, 10, key, "by 10 again")
	mustRead(ctx, t, s.target(t), key, "by 10 again", true, "through a third Target")
}

// restartKeepsMax tests that the maximum survives a restart of the store:
// raised by a guarded write or by Check alone, and exactly when it is
// above 2^53.
func restartKeepsMax(ctx context.Context, t *testing.T, s *suite) {
	name, key := s.name("restart"), s.key("restart")
	write(ctx, t, s.target(t), name, 10, key, "by 10")
	list := raiseMaxima(ctx, t, s, s.target(t), "restart")
	s.h.Restart(t)
	tg := s.target(t)
	mustBeStale(t, "Write after a restart", tg.Write(ctx, name, 5, key, "by 5"), name, 5, 10)
	mustRead(ctx, t, tg, key, "by 10", true, "after a restart")
	heldTo(ctx, t, s, tg, list, "after a restart")
	write(ctx, t, tg, name, 11, key, "by 11")
}

// raised is a maximum set by raiseMaxima.
type raised struct {
	how         string // how it was raised, for messages
	name        string
	token       uint64
	key, value  string // the item its guarded write set; key is "" for Check alone
	checkedOnly bool
}

// raiseMaxima raises four maxima through tg, each on a new name: by a
// guarded write and by Check alone (no write), each with a small token and
// with a token above 2^53, which a float64 would round down (2^53+1 to
// 2^53, 2^62+1 to 2^62) on its way through a JSON number, a Lua number or
// a floating-point column.
func raiseMaxima(ctx context.Context, t *testing.T, s *suite, tg Target, label string) []raised {
	t.Helper()
	list := []raised{
		{how: "a guarded write", token: 12},
		{how: "Check alone, with no write", token: 20, checkedOnly: true},
		{how: "a guarded write", token: 1<<53 + 1},
		{how: "Check alone, with no write", token: 1<<62 + 1, checkedOnly: true},
	}
	for i := range list {
		r := &list[i]
		r.name = s.name(fmt.Sprintf("%s-%d", label, i))
		if r.checkedOnly {
			if err := tg.Check(ctx, r.name, r.token); err != nil {
				t.Fatalf("Check(%s, token %d) of a new name: %v", short(r.name), r.token, err)
			}
			continue
		}
		r.key, r.value = s.key(fmt.Sprintf("%s-%d", label, i)), fmt.Sprintf("by %d", r.token)
		write(ctx, t, tg, r.name, r.token, r.key, r.value)
	}
	return list
}

// heldTo checks that tg holds writes and checks to each maximum in list,
// exactly: one below it is refused naming it, it is accepted again, and
// the item its guarded write set still holds that write.
func heldTo(ctx context.Context, t *testing.T, s *suite, tg Target, list []raised, where string) {
	t.Helper()
	for _, r := range list {
		what := fmt.Sprintf("%s, after token %d was accepted by %s: ", where, r.token, r.how)
		probe := s.key("probe")
		mustBeStale(t, what+"Write", tg.Write(ctx, r.name, r.token-1, probe, "stale"), r.name, r.token-1, r.token)
		mustRead(ctx, t, tg, probe, "", false, what+"a refused write")
		mustBeStale(t, what+"Check", tg.Check(ctx, r.name, r.token-1), r.name, r.token-1, r.token)
		if r.key != "" {
			mustRead(ctx, t, tg, r.key, r.value, true, what+"the guarded write's item")
		}
		if err := tg.Check(ctx, r.name, r.token); err != nil {
			t.Fatalf("%sCheck with that token: %v; want it accepted (an equal token), the maximum neither lost nor moved up", what, err)
		}
	}
}

// badInput tests that invalid names and tokens are refused before the
// store is touched, with lease.ErrInvalid.
func badInput(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	name := s.name("bad")
	bad := []struct {
		what  string
		name  string
		token uint64
	}{
		{"token 0", name, 0},
		{"a token above fence.MaxToken", name, fence.MaxToken + 1},
		{"the largest uint64 token", name, ^uint64(0)},
		{"an empty name", "", 1},
		{"a name of 1025 bytes", name + strings.Repeat("x", lease.MaxNameLen+1-len(name)), 1},
		{"a name that is not UTF-8", name + "\xff", 1},
	}
	for _, b := range bad {
		key := s.key("bad")
		checkErrKind(t, "Write with "+b.what, tg.Write(ctx, b.name, b.token, key, "bad"), lease.ErrInvalid)
		mustRead(ctx, t, tg, key, "", false, "Write with "+b.what)
		checkErrKind(t, "Check with "+b.what, tg.Check(ctx, b.name, b.token), lease.ErrInvalid)
	}
	// None of them raised the maximum of the valid name.
	write(ctx, t, tg, name, 1, s.key("bad-after"), "by 1")
}

// cancelledContext tests that a call with a cancelled context fails with
// the context's error, not as stale, and changes nothing.
func cancelledContext(ctx context.Context, t *testing.T, s *suite) {
	tg := s.target(t)
	name, key := s.name("cancelled"), s.key("cancelled")
	write(ctx, t, tg, name, 10, key, "by 10")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := tg.Write(cctx, name, 20, key, "by 20")
	if err == nil {
		t.Fatal("Write with a cancelled context succeeded")
	}
	checkErrKind(t, "Write with a cancelled context", err, context.Canceled)
	err = tg.Write(cctx, name, 5, key, "by 5")
	if err == nil || errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Write with a cancelled context: got %v; want the context's error, not a verdict", err)
	}
	checkErrKind(t, "Check with a cancelled context", tg.Check(cctx, name, 20), context.Canceled)
	mustRead(ctx, t, tg, key, "by 10", true, "after calls with a cancelled context")
	write(ctx, t, tg, name, 10, key, "by 10 again")
}
