package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/line"
	"github.com/leasekit/lease/internal/testenv"
)

// Each broken backend breaks one promise; the case named for that promise
// must fail it. Only that case is run against it: what the other cases do
// with a broken backend proves nothing about this one.
var brokenModes = map[string]string{
	"two-holders":                   "another owner gets ErrHeld with the holder and remaining time",
	"token-restarts-after-release":  "release then re-acquire by the same owner gets a larger token",
	"reentrant-new-token":           "holder's re-acquire keeps the token and moves expiry to now+ttl",
	"renew-ignores-token":           "old owner cannot renew or release after its own re-acquire started a new tenure",
	"renew-ignores-owner":           "old owner cannot renew after takeover",
	"renew-revives-expired":         "old owner cannot renew after plain expiry",
	"renew-never-shortens":          "renew and re-acquire with a shorter ttl end the tenure sooner",
	"release-ignores-owner":         "old owner cannot release after takeover",
	"release-swallows-lost":         "old owner cannot release after plain expiry",
	"never-expires":                 "takeover after expiry gives a larger token",
	"inspect-ignores-expiry":        "inspect reports an expired tenure as not held",
	"inspect-invents-holder":        "inspect reports a free name as not held",
	"deadline-after-response":       "the Deadline is read before the request and ends a drift margin early",
	"deadline-without-margin":       "the Deadline is read before the request and ends a drift margin early",
	"deadline-from-store-clock":     "the Deadline is read before the request and ends a drift margin early",
	"deadline-after-slow-reply":     "no other owner acquires a name before the previous holder's Deadline",
	"canceled-as-held":              "canceled context is reported as such, not as held or lost",
	"case-insensitive-names":        "names with awkward characters never collide",
	"truncated-names":               "long names sharing a 1000-byte prefix do not collide",
	"no-validation":                 "bad input is refused with ErrInvalid and writes nothing",
	"ttl-limits-ignored":            "ttls from MinTTL to MaxTTL are accepted and nothing outside them",
	"usable-after-close":            "a closed locker refuses every call with ErrClosed",
	"racy-acquire":                  "concurrent acquires on a free name: exactly one wins",
	"busy-remembered":               "a locker told the name is held acquires it at once after another locker releases it",
	"batch-revives-expired":         "a batch of renewals gives each tenure the answer Renew would",
	"renew-extends-owner":           "tenures acquired together expire on their own when only some are renewed",
	"watch-never-wakes":             "a watch wakes when the name is released or force-released",
	"watch-local-only":              "a watch wakes when another locker releases or force-releases the name",
	"turn-wakes-all":                "a release wakes only the waiting locker whose mark is oldest",
	"turn-mark-never-lapses":        "a lapsed mark no longer gets the turn",
	"batch-sorted":                  "a batch answers each request in its place, whatever their order",
	"batch-one-ttl":                 "a batch that mixes ttls gives each tenure its own",
	"batch-extends-name":            "a batch that renews a taken-over tenure leaves the taker's expiry as its grant set it",
	"batch-first-128":               "a batch as large as Run sends keeps every tenure held past its first expiry",
	"batch-first-128-slow-acquires": "a batch as large as Run sends keeps every tenure held past its first expiry",
	"list-includes-expired":         "list returns the held tenures under a prefix in name order",
	"list-like-prefix":              "list returns the held tenures under a prefix in name order",
	"force-revives-owner":           "force release ends any tenure and keeps token order",
	"watch-wakes-early":             "a watch wakes when the name is released or force-released",
	"turn-deadline-late":            "the Deadline is read before the request and ends a drift margin early",
	"batch-of-one-lost-as-error":    "Run cancels fn's context with ErrLost when a renewal finds the lease lost",
	"client-clock":                  "Lockers whose clocks disagree see the same expiry: the store's",
}

func toyHarness(mode string) conformance.Harness {
	store := &toyStore{mode: mode, leases: map[string]*toyTenure{}, tokens: map[string]uint64{}}
	return conformance.Harness{
		New:     func(testing.TB) lease.Locker { return &toy{toyStore: store} },
		TTL:     100 * time.Millisecond,
		Tenures: 200,
		NewSkewed: func(_ testing.TB, skew time.Duration) lease.Locker {
			return &toy{toyStore: store, skew: skew}
		},
	}
}

func TestSuiteCatchesBrokenBackends(t *testing.T) {
	testenv.Slow(t)
	for mode, want := range brokenModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			results := conformance.CheckOnly(t.Context(), toyHarness(mode), want)
			if len(results) != 1 || results[0].Case != want {
				t.Fatalf("CheckOnly(%q) returned %v", want, results)
			}
			if r := results[0]; r.Outcome != conformance.Failed {
				t.Fatalf("the case %q passed a backend broken by %q: %s %s", want, mode, r.Outcome, r.Reason)
			}
		})
	}
}

func TestBrokenModesNameRealCases(t *testing.T) {
	names := map[string]bool{}
	for _, c := range conformance.Cases() {
		names[c.Name] = true
	}
	for mode, want := range brokenModes {
		if !names[want] {
			t.Errorf("broken mode %q expects a failure in %q, which is not a case of the suite", mode, want)
		}
	}
}

// TestToyBackendPasses shows the toy backend passes when nothing is
// broken, so each failure above is the broken promise's doing.
func TestToyBackendPasses(t *testing.T) {
	conformance.Run(t, toyHarness(""))
}

// TestCheckReportsEveryCase runs the suite outside the testing package's
// runner, as "lease check" does, and expects one result per case.
func TestCheckReportsEveryCase(t *testing.T) {
	testenv.Slow(t)
	results := conformance.Check(t.Context(), toyHarness(""))
	if len(results) != len(conformance.Cases()) {
		t.Fatalf("Check returned %d results for %d cases", len(results), len(conformance.Cases()))
	}
	for i, r := range results {
		if r.Case != conformance.Cases()[i].Name {
			t.Errorf("result %d is for %q, want %q", i, r.Case, conformance.Cases()[i].Name)
		}
		if r.Outcome != conformance.Passed && r.Outcome != conformance.Skipped {
			t.Errorf("%s: %s: %s", r.Case, r.Outcome, r.Reason)
		}
	}
}

// toyStore is a small Locker that keeps the contract except where mode
// breaks it.
type toyStore struct {
	mode    string
	watches sync.Map // name -> chan struct{} of the one watch on it
	mu      sync.Mutex
	leases  map[string]*toyTenure
	tokens  map[string]uint64
	turns   toyTurns
}

type toyTenure struct {
	name, owner string
	token       uint64
	expires     time.Time
	evicted     bool // force-revives-owner: ended by ForceRelease, revived by its owner
}

type toy struct {
	*toyStore
	closed atomic.Bool
	// skew is how far this Locker's clock is off (NewSkewed); only mode
	// client-clock reads it.
	skew time.Duration
	// own holds this Locker's watches in mode watch-local-only, where a
	// Release wakes only the watches of the Locker it went through.
	own sync.Map
	// busy holds, in mode busy-remembered, the HeldError each name last
	// got on this Locker, given again until the holder's time is up
	// whatever happened to the tenure meanwhile.
	busy sync.Map // name -> rememberedBusy
}

// rememberedBusy is a busy answer and when the holder's time is up.
type rememberedBusy struct {
	err   *lease.HeldError
	until time.Time
}

// watchesOf is where the toy keeps its watches: the store's, or in mode
// watch-local-only its own.
func (l *toy) watchesOf() *sync.Map {
	if l.is("watch-local-only") {
		return &l.own
	}
	return &l.watches
}

func (s *toyStore) is(mode string) bool { return s.mode == mode }

func (s *toyStore) key(name string) string {
	switch {
	case s.is("case-insensitive-names"):
		return strings.ToLower(name)
	case s.is("truncated-names") && len(name) > 1000:
		return name[:1000]
	}
	return name
}

// live is the tenure of name unless it has expired: by the store's
// clock, or in mode client-clock by this Locker's.
func (l *toy) live(name string) *toyTenure {
	t := l.leases[l.key(name)]
	if t == nil || (!l.is("never-expires") && !l.now().Before(t.expires)) {
		return nil
	}
	return t
}

// now is the clock expiry is judged by: the store's, or in mode
// client-clock this Locker's own, skew off.
func (l *toy) now() time.Time {
	if l.is("client-clock") {
		return time.Now().Add(l.skew)
	}
	return time.Now()
}

func (l *toy) check(ctx context.Context) error {
	if l.closed.Load() && !l.is("usable-after-close") {
		return lease.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		if l.is("canceled-as-held") {
			return &lease.HeldError{Name: "?", Owner: "?", Remaining: time.Second}
		}
		return err
	}
	return nil
}

func (l *toy) deadline(start time.Time, ttl time.Duration, expires time.Time) time.Time {
	switch {
	case l.is("deadline-after-response"):
		return time.Now().Add(ttl - lease.DriftMargin(ttl)/4)
	case l.is("deadline-without-margin"):
		return start.Add(ttl)
	case l.is("deadline-from-store-clock"):
		return expires.Round(0).Add(-lease.DriftMargin(ttl))
	}
	return driver.DeadlineFrom(start, ttl)
}

func (l *toy) out(t *toyTenure, start time.Time, ttl time.Duration) lease.Lease {
	return lease.Lease{Name: t.name, Owner: t.owner, Token: t.token, Expires: t.expires, Deadline: l.deadline(start, ttl, t.expires)}
}

func (l *toy) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if w := line.FromContext(ctx); w != nil {
		return l.acquireInLine(ctx, w, name, owner, ttl)
	}
	return l.acquirePlain(ctx, name, owner, ttl)
}

func (l *toy) acquirePlain(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if l.is("batch-first-128-slow-acquires") && strings.Contains(name, "batch-large") {
		// The case's 300 Acquires take a good part of the ttl it gives
		// them (about 80ms of 200ms), so the later ones are still young
		// when the first expire: a case that waits from before the first
		// Acquire looks too early, and passes a batch that renewed only
		// the first 128.
		time.Sleep(4 * time.Millisecond)
	}
	if l.is("busy-remembered") {
		if b, ok := l.busy.Load(name); ok {
			if b := b.(rememberedBusy); b.err.Owner != owner && time.Now().Before(b.until) {
				return lease.Lease{}, b.err
			}
		}
	}
	got, err := l.acquire(ctx, name, owner, ttl)
	if he := (*lease.HeldError)(nil); l.is("busy-remembered") && errors.As(err, &he) {
		l.busy.Store(name, rememberedBusy{err: he, until: time.Now().Add(he.Remaining)})
	}
	if err == nil && l.is("deadline-after-slow-reply") && got.Token == 1 {
		// The reply to the first grant of a name takes a while to come
		// back (later ones are quick), and the Deadline is read when it
		// arrives rather than before the request.
		time.Sleep(30 * time.Millisecond)
		got.Deadline = time.Now().Add(ttl - lease.DriftMargin(ttl))
	}
	return got, err
}

func (l *toy) validate(name, owner string, ttl time.Duration) error {
	switch {
	case l.is("no-validation"):
		return nil
	case l.is("ttl-limits-ignored"):
		if ttl <= 0 {
			return driver.CheckTTL(ttl)
		}
		return driver.CheckAcquire(name, owner, time.Second)
	}
	return driver.CheckAcquire(name, owner, ttl)
}

func (l *toy) acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if err := l.validate(name, owner, ttl); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	if l.is("racy-acquire") {
		l.mu.Lock()
		free := l.live(name) == nil
		l.mu.Unlock()
		time.Sleep(time.Millisecond)
		if free {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.tokens[l.key(name)]++
			t := &toyTenure{name: name, owner: owner, token: l.tokens[l.key(name)], expires: time.Now().Add(ttl)}
			l.leases[l.key(name)] = t
			return l.out(t, start, ttl), nil
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return lease.Lease{}, err
	}
	t := l.live(name)
	if old := l.leases[l.key(name)]; t == nil && old != nil && old.evicted && old.owner == owner {
		t = old // force-revives-owner
		t.evicted = false
	}
	switch {
	case t != nil && t.owner != owner && !l.is("two-holders"):
		return lease.Lease{}, &lease.HeldError{Name: name, Owner: t.owner, Remaining: time.Until(t.expires)}
	case t == nil || t.owner != owner || l.is("reentrant-new-token"):
		l.tokens[l.key(name)]++
		t = &toyTenure{name: name, owner: owner, token: l.tokens[l.key(name)]}
		l.leases[l.key(name)] = t
	}
	t.expires = l.now().Add(ttl)
	return l.out(t, start, ttl), nil
}

func (l *toy) intact(held lease.Lease) *toyTenure {
	t := l.live(held.Name)
	if l.is("renew-revives-expired") {
		t = l.leases[l.key(held.Name)]
	}
	if t == nil {
		return nil
	}
	if t.owner == held.Owner && t.token == held.Token ||
		l.is("renew-ignores-token") && t.owner == held.Owner ||
		l.is("renew-ignores-owner") {
		return t
	}
	return nil
}

func (l *toy) Renew(ctx context.Context, held lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := driver.CheckLease(held); err != nil && !l.is("no-validation") {
		return lease.Lease{}, err
	}
	if err := l.validate(held.Name, held.Owner, ttl); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	if l.is("slow-renew") && strings.Contains(held.Name, "burst-1") && held.Expires.After(start) {
		// A correct store behind a slow link: the request reaches it
		// after the tenure's expiry.
		time.Sleep(time.Until(held.Expires) + 10*time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return lease.Lease{}, err
	}
	t := l.intact(held)
	if t == nil {
		return lease.Lease{}, lease.ErrLost
	}
	if exp := l.now().Add(ttl); !l.is("renew-never-shortens") || exp.After(t.expires) {
		t.expires = exp
	}
	if l.is("renew-extends-owner") {
		// As if the owner's tenures shared one expiry (one etcd lease).
		for _, o := range l.leases {
			if o.owner == t.owner && o.expires.After(time.Now()) && o.expires.Before(t.expires) {
				o.expires = t.expires
			}
		}
	}
	return l.out(t, start, ttl), nil
}

func (l *toy) Release(ctx context.Context, held lease.Lease) error {
	if err := driver.CheckLease(held); err != nil && !l.is("no-validation") {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return err
	}
	t := l.live(held.Name)
	intact := t != nil && t.owner == held.Owner && t.token == held.Token
	if l.is("renew-ignores-token") {
		intact = l.intact(held) != nil
	}
	if l.is("release-ignores-owner") && t != nil {
		intact = true
	}
	if !intact {
		if l.is("release-swallows-lost") {
			return nil
		}
		return lease.ErrLost
	}
	if l.is("watch-wakes-early") {
		// Wakes the watches as it starts, and the deletion lands a
		// moment later (a notification sent before the commit).
		l.wakeWatch(held.Name)
		l.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		l.mu.Lock()
	}
	delete(l.leases, l.key(held.Name))
	l.wakeTurn(held.Name)
	if !l.is("watch-wakes-early") {
		l.wakeWatch(held.Name)
	}
	if l.is("token-restarts-after-release") {
		delete(l.tokens, l.key(held.Name))
	}
	return nil
}

func (l *toy) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	if err := driver.CheckName(name); err != nil && !l.is("no-validation") {
		return lease.Lease{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return lease.Lease{}, err
	}
	t := l.live(name)
	if l.is("inspect-ignores-expiry") {
		t = l.leases[l.key(name)]
	}
	if t == nil {
		if l.is("inspect-invents-holder") {
			return lease.Lease{Name: name, Owner: "ghost", Token: 1, Expires: time.Now().Add(time.Minute)}, nil
		}
		return lease.Lease{}, fmt.Errorf("toy: %w", lease.ErrNotHeld)
	}
	return lease.Lease{Name: name, Owner: t.owner, Token: t.token, Expires: t.expires}, nil
}

// RenewBatch renews one request at a time, as Renew would, except in
// the batch-* modes (renewBatch).
func (l *toy) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	reqs := make([]batchtest.Req, len(leases))
	for i := range reqs {
		reqs[i] = batchtest.Req{Lease: leases[i], TTL: ttls[i]}
	}
	res := l.renewBatch(ctx, reqs)
	out, errs := make([]lease.Lease, len(res)), make([]error, len(res))
	for i, r := range res {
		out[i], errs[i] = r.Lease, r.Err
	}
	return out, errs
}

func (l *toy) renewBatch(ctx context.Context, reqs []batchtest.Req) []batchtest.Res {
	out := make([]batchtest.Res, len(reqs))
	switch {
	case l.is("batch-sorted"):
		// Answers in name order, as a store that sorts the keys it reads.
		sorted := slices.Clone(reqs)
		slices.SortStableFunc(sorted, func(a, b batchtest.Req) int { return strings.Compare(a.Lease.Name, b.Lease.Name) })
		for i, r := range sorted {
			out[i].Lease, out[i].Err = l.Renew(ctx, r.Lease, r.TTL)
		}
		return out
	case l.is("batch-one-ttl") && len(reqs) > 0:
		// One ttl for the whole batch: the first request's.
		for i, r := range reqs {
			out[i].Lease, out[i].Err = l.Renew(ctx, r.Lease, reqs[0].TTL)
		}
		return out
	case l.is("batch-of-one-lost-as-error") && len(reqs) == 1:
		// A batch of one takes a path of its own, which reports a lost
		// tenure as a store error.
		out[0].Lease, out[0].Err = l.Renew(ctx, reqs[0].Lease, reqs[0].TTL)
		if errors.Is(out[0].Err, lease.ErrLost) {
			out[0].Err = errors.New("toy: the renewal did not go through")
		}
		return out
	case l.is("batch-first-128") || l.is("batch-first-128-slow-acquires"):
		// Renews the first 128 and says it renewed them all.
		for i, r := range reqs {
			if i < 128 {
				out[i].Lease, out[i].Err = l.Renew(ctx, r.Lease, r.TTL)
			} else {
				out[i].Lease = r.Lease
			}
		}
		return out
	}
	for i, r := range reqs {
		if l.is("batch-extends-name") && r.TTL > 0 {
			// Extends whatever tenure holds the name, as a store that
			// renews by name and checks the owner only for its answer.
			l.mu.Lock()
			if t := l.live(r.Lease.Name); t != nil {
				t.expires = time.Now().Add(r.TTL)
			}
			l.mu.Unlock()
		}
		if l.is("batch-revives-expired") && r.TTL > 0 {
			l.mu.Lock()
			if t := l.leases[l.key(r.Lease.Name)]; t != nil && t.owner == r.Lease.Owner && t.token == r.Lease.Token {
				t.expires = time.Now().Add(r.TTL)
				out[i].Lease = l.out(t, time.Now(), r.TTL)
				l.mu.Unlock()
				continue
			}
			l.mu.Unlock()
		}
		out[i].Lease, out[i].Err = l.Renew(ctx, r.Lease, r.TTL)
	}
	return out
}

// wakeWatch wakes the watch on name (but not in mode watch-never-wakes).
func (l *toy) wakeWatch(name string) {
	if c, ok := l.watchesOf().Load(name); ok && !l.is("watch-never-wakes") {
		select {
		case c.(chan struct{}) <- struct{}{}:
		default:
		}
	}
}

// List returns the live tenures whose names start with prefix, in name
// order (but expired ones too in mode list-includes-expired, and prefix
// read as a SQL LIKE pattern in mode list-like-prefix).
func (l *toy) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	match := func(name string) bool { return strings.HasPrefix(name, prefix) }
	if l.is("list-like-prefix") {
		re := regexp.MustCompile("^" + strings.NewReplacer("%", ".*", "_", ".").Replace(regexp.QuoteMeta(prefix)))
		match = re.MatchString
	}
	var out []lease.Lease
	for _, t := range l.leases {
		if !match(t.name) || l.live(t.name) != t && !l.is("list-includes-expired") {
			continue
		}
		out = append(out, lease.Lease{Name: t.name, Owner: t.owner, Token: t.token, Expires: t.expires})
	}
	slices.SortFunc(out, func(a, b lease.Lease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ForceRelease ends the tenure of name whoever holds it (in mode
// force-revives-owner it only marks it expired, and the evicted owner's
// next Acquire takes it up again with its token).
func (l *toy) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return lease.Lease{}, err
	}
	t := l.live(name)
	if t == nil {
		return lease.Lease{}, fmt.Errorf("toy: %w", lease.ErrNotHeld)
	}
	ended := lease.Lease{Name: t.name, Owner: t.owner, Token: t.token, Expires: time.Now()}
	if l.is("force-revives-owner") {
		t.expires = time.Now()
		t.evicted = true
	} else {
		delete(l.leases, l.key(name))
	}
	l.wakeTurn(name)
	l.wakeWatch(name)
	return ended, nil
}

// Watch keeps one watch per name, woken by Release (but not in mode
// watch-never-wakes, and only through the same Locker in mode
// watch-local-only).
func (l *toy) Watch(ctx context.Context, name string) (driver.Watch, error) {
	c := make(chan struct{}, 1)
	watches := l.watchesOf()
	watches.Store(name, c)
	return toyWatch{c: c, stop: func() { watches.CompareAndDelete(name, c) }}, nil
}

type toyWatch struct {
	c    chan struct{}
	stop func()
}

func (w toyWatch) Changed() <-chan struct{} { return w.c }
func (w toyWatch) Stop()                    { w.stop() }

func (l *toy) Close() error {
	l.closed.Store(true)
	return nil
}

// TestFailureSaysWhere: a failure names the file, line and function of
// the case that found it (and of the shared helper that checked, if any),
// never only the runner's.
func TestFailureSaysWhere(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	modes := []string{"two-holders", "turn-wakes-all", "renew-extends-owner"}
	byMode := make([][]conformance.Result, len(modes))
	var wg sync.WaitGroup
	for i, mode := range modes {
		wg.Go(func() { byMode[i] = conformance.Check(t.Context(), toyHarness(mode)) })
	}
	wg.Wait()
	results := slices.Concat(byMode...)
	where := regexp.MustCompile(`^[a-z_]+\.go:[0-9]+ \([A-Za-z]+(, in [a-z_]+\.go:[0-9]+ \([A-Za-z]+\))?\): `)
	n := 0
	for _, r := range results {
		if r.Outcome != conformance.Failed {
			continue
		}
		n++
		for _, line := range strings.Split(r.Reason, "\n") {
			if !where.MatchString(line) || strings.HasPrefix(line, "runner.go") {
				t.Errorf("%s: the failure %q does not say where the case found it", r.Case, line)
			}
		}
	}
	if n == 0 {
		t.Fatal("the two-holders toy failed no case")
	}
}

// TestSlowStoreIsUntested: a correct store whose Renew reaches it after
// the tenure's expiry (a slow link, a loaded machine) answers ErrLost, as
// it should; the case that needed the Renew in time reports that it could
// not test, with the timings, never that the store broke a promise.
func TestSlowStoreIsUntested(t *testing.T) {
	const want = "tenures acquired together expire on their own when only some are renewed"
	for _, r := range conformance.CheckOnly(t.Context(), toyHarness("slow-renew"), want) {
		if r.Case != want {
			continue
		}
		if r.Outcome != conformance.Untested || !strings.Contains(r.Reason, "after the lease's Deadline") {
			t.Fatalf("%s on a slow store: %s: %s; want untested, with the timings", want, r.Outcome, r.Reason)
		}
		return
	}
	t.Fatalf("no result for %q", want)
}
