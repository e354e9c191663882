package sqllease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/batchtest"
)

// batchCase is one request of a batch and what a single Renew must answer.
type batchCase struct {
	what string
	req  batchtest.Req
	want error // nil (renewed), lease.ErrLost or lease.ErrInvalid
}

// expireRow makes name's tenure expired in s's table, as the passing of
// its ttl would (an expiry long past, not the minus-now of a release).
func expireRow(t *testing.T, s *testStore, name string) {
	t.Helper()
	q := map[Dialect]string{
		SQLite:     "UPDATE " + s.table + " SET expires_at = 1 WHERE lease_key = ?1",
		PostgreSQL: "UPDATE " + s.table + " SET expires_at = 1 WHERE lease_key = $1",
		MySQL:      "UPDATE " + s.table + " SET expires_at = 1 WHERE lease_key = ?",
	}[s.dialect]
	res, err := s.db.Exec(q, key(name))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("expiring %q changed %d rows, want 1", name, n)
	}
}

// batchScenario sets up, under names starting with prefix, tenures in
// every state a batch can meet, and returns the requests that renew them:
// intact ones (several of them twice or three times, with different
// ttls), expired, released, taken over by another owner, re-acquired by
// the same owner (so the old token is stale), a forged owner and token, a
// name never acquired, and a malformed request.
func batchScenario(t *testing.T, s *testStore, l *Locker, prefix string) []batchCase {
	t.Helper()
	ctx := context.Background()
	acq := func(name, owner string) lease.Lease {
		t.Helper()
		ls, err := l.Acquire(ctx, prefix+name, owner, time.Minute)
		if err != nil {
			t.Fatalf("Acquire %s: %v", name, err)
		}
		return ls
	}
	req := func(ls lease.Lease, ttl time.Duration) batchtest.Req {
		return batchtest.Req{Lease: ls, TTL: ttl}
	}
	odd := `o"\<&>é😀 ` + "\t"
	intact := acq("intact", "a")
	intact2 := acq("intact-2", "a")
	intactOdd := acq("intact-odd/ключ\x00", odd)
	long := acq(strings.Repeat("n", lease.MaxNameLen-len(prefix)), strings.Repeat("o", lease.MaxOwnerLen))
	expired := acq("expired", "a")
	expireRow(t, s, prefix+"expired")
	released := acq("released", "a")
	if err := l.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	taken := acq("taken", "a")
	if err := l.Release(ctx, taken); err != nil {
		t.Fatal(err)
	}
	acq("taken", "b")
	stale := acq("reacquired", "a")
	expireRow(t, s, prefix+"reacquired")
	current := acq("reacquired", "a")
	if current.Token == stale.Token {
		t.Fatalf("re-acquiring an expired tenure kept token %d", stale.Token)
	}
	forgedOwner, forgedToken := intact2, intact2
	forgedOwner.Owner = "b"
	forgedToken.Token++
	never := lease.Lease{Name: prefix + "never", Owner: "a", Token: 12345, Expires: intact.Expires, Acquired: intact.Acquired}
	malformed := intact
	malformed.Token = 0

	return []batchCase{
		{"intact", req(intact, 30*time.Second), nil},
		{"expired", req(expired, time.Minute), lease.ErrLost},
		{"intact-2", req(intact2, 40*time.Second), nil},
		{"intact again, longer ttl", req(intact, 2*time.Minute), nil},
		{"released", req(released, time.Minute), lease.ErrLost},
		{"taken over", req(taken, time.Minute), lease.ErrLost},
		{"stale token of a re-acquired name", req(stale, time.Minute), lease.ErrLost},
		{"current token of the same name", req(current, 50*time.Second), nil},
		{"forged owner", req(forgedOwner, time.Minute), lease.ErrLost},
		{"forged token", req(forgedToken, time.Minute), lease.ErrLost},
		{"never acquired", req(never, time.Minute), lease.ErrLost},
		{"malformed (token 0)", req(malformed, time.Minute), lease.ErrInvalid},
		{"odd name and owner", req(intactOdd, 20*time.Second), nil},
		{"longest name and owner", req(long, 25*time.Second), nil},
		{"expired again", req(expired, 10*time.Second), lease.ErrLost},
		{"intact a third time, shorter ttl", req(intact, 45*time.Second), nil},
		{"stale token again", req(stale, time.Minute), lease.ErrLost},
	}
}

// outcomeClass names the kind of a renewal's outcome.
func outcomeClass(err error) string {
	switch {
	case err == nil:
		return "renewed"
	case errors.Is(err, lease.ErrLost):
		return "lost"
	case errors.Is(err, lease.ErrInvalid):
		return "invalid"
	}
	return "error: " + err.Error()
}

// TestRenewBatchMatchesRenew builds the same scenario twice, renews one
// copy with one RenewBatch (through the public batchtest.Batcher of the
// Locker) and the other with single Renews in the same order, and checks
// that each request gets the same answer: renewed with the same name,
// owner, token and Acquired, lost, or invalid. A renewed tenure's row
// expires when the result says (the last request's, for a tenure asked
// for several times), the batch's requests for one tenure share its
// statement's now, and lost tenures' rows are left as they were. Runs
// with one statement for the whole batch, with a few tenures per
// statement (several statements), and on MySQL with the one-at-a-time
// path of servers without JSON_TABLE.
func TestRenewBatchMatchesRenew(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		t.Run("one-statement", func(t *testing.T) { checkBatchMatchesRenew(t, s, func(*Locker) {}) })
		t.Run("chunks-of-3", func(t *testing.T) { checkBatchMatchesRenew(t, s, func(l *Locker) { setBatchChunk(l, 3) }) })
		if s.dialect == MySQL {
			t.Run("no-json-table", func(t *testing.T) { checkBatchMatchesRenew(t, s, func(l *Locker) { forceNoJSONTable(t, l) }) })
		}
	})
}

func checkBatchMatchesRenew(t *testing.T, s *testStore, tweak func(*Locker)) {
	ctx := context.Background()
	l := s.newLocker(t)
	tweak(l)
	run := fmt.Sprintf("%d/", time.Now().UnixNano())
	batch := batchScenario(t, s, l, run+"b/")
	single := batchScenario(t, s, l, run+"s/")

	// What the rows of the names with no tenure to renew hold before.
	renewable := map[string]bool{}
	for _, c := range batch {
		renewable[c.req.Lease.Name] = renewable[c.req.Lease.Name] || c.want == nil
	}
	before := map[string]lease.Lease{} // the zero Lease when not held
	for name, r := range renewable {
		if r {
			continue
		}
		ls, err := l.Inspect(ctx, name)
		if err != nil && !errors.Is(err, lease.ErrNotHeld) {
			t.Fatal(err)
		}
		before[name] = ls
	}

	var br batchtest.Batcher = l
	reqs := make([]batchtest.Req, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
	}
	got := batchtest.RenewBatch(ctx, br, reqs)
	if len(got) != len(reqs) {
		t.Fatalf("RenewBatch returned %d results for %d requests", len(got), len(reqs))
	}
	want := make([]batchtest.Res, len(single))
	for i, c := range single {
		want[i].Lease, want[i].Err = l.Renew(ctx, c.req.Lease, c.req.TTL)
	}

	// The last request of each renewed tenure, which sets its row's expiry.
	last := map[string]int{}
	for i, c := range batch {
		if c.want == nil {
			last[c.req.Lease.Name] = i
		}
	}
	for i, c := range batch {
		g, w := got[i], want[i]
		gc, wc := outcomeClass(g.Err), outcomeClass(w.Err)
		t.Logf("%-36s batch: %-8s single: %s", c.what, gc, wc)
		if gc != wc {
			t.Errorf("%s: RenewBatch: %v; Renew: %v", c.what, g.Err, w.Err)
			continue
		}
		if wc != outcomeClass(c.want) {
			t.Errorf("%s: both %s, want %s", c.what, wc, outcomeClass(c.want))
			continue
		}
		if g.Err != nil {
			if g.Lease != (lease.Lease{}) {
				t.Errorf("%s: RenewBatch failed with %v and returned a lease %+v", c.what, g.Err, g.Lease)
			}
			continue
		}
		for _, r := range []struct {
			who string
			got lease.Lease
			req lease.Lease
		}{{"RenewBatch", g.Lease, c.req.Lease}, {"Renew", w.Lease, single[i].req.Lease}} {
			if r.got.Name != r.req.Name || r.got.Owner != r.req.Owner || r.got.Token != r.req.Token {
				t.Errorf("%s: %s renewed %q/%q/%d, asked for %q/%q/%d", c.what, r.who, r.got.Name, r.got.Owner, r.got.Token, r.req.Name, r.req.Owner, r.req.Token)
			}
			if !r.got.Acquired.Equal(r.req.Acquired) || r.got.Acquired.IsZero() {
				t.Errorf("%s: %s's Acquired is %v, the tenure began at %v", c.what, r.who, r.got.Acquired, r.req.Acquired)
			}
			if r.got.Deadline.IsZero() {
				t.Errorf("%s: %s's lease has no Deadline", c.what, r.who)
			}
		}
		// Every request for this tenure was renewed at the same now, to
		// now + its own ttl; the row keeps the last one's expiry.
		j := last[c.req.Lease.Name]
		if now, lastNow := g.Lease.Expires.Add(-c.req.TTL), got[j].Lease.Expires.Add(-batch[j].req.TTL); !now.Equal(lastNow) {
			t.Errorf("%s: renewed at %v by the database's clock, the same tenure's last request at %v: one statement has one now", c.what, now, lastNow)
		}
		row, err := l.Inspect(ctx, c.req.Lease.Name)
		if err != nil || row.Token != c.req.Lease.Token || !row.Expires.Equal(got[j].Lease.Expires) {
			t.Errorf("%s: the row holds %+v, %v after the batch; want token %d expiring %v", c.what, row, err, c.req.Lease.Token, got[j].Lease.Expires)
		}
		if i == j {
			row, err := l.Inspect(ctx, single[i].req.Lease.Name)
			if err != nil || !row.Expires.Equal(w.Lease.Expires) {
				t.Errorf("%s: after single Renews the row holds %+v, %v; want it expiring %v", c.what, row, err, w.Lease.Expires)
			}
		}
	}
	for name, b := range before {
		ls, err := l.Inspect(ctx, name)
		if err != nil && !errors.Is(err, lease.ErrNotHeld) || ls.Owner != b.Owner || ls.Token != b.Token || !ls.Expires.Equal(b.Expires) {
			t.Errorf("%q: the batch changed a tenure it did not renew: %+v before, %+v, %v after", name, b, ls, err)
		}
	}
}

// acquireMany acquires n names under prefix for owner, a few at a time
// (one at a time on SQLite, which lets one connection write at a time:
// more would only wait in its busy handler, and take longer).
func acquireMany(t testing.TB, l lease.Locker, prefix, owner string, n int) []lease.Lease {
	t.Helper()
	workers := 16
	if sl, ok := l.(*Locker); ok && sl.Dialect() == SQLite {
		workers = 1
	}
	out := make([]lease.Lease, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				out[i], errs[i] = l.Acquire(context.Background(), prefix+strconv.Itoa(i), owner, 5*time.Minute)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Acquire %d of %d: %v", i, n, err)
		}
	}
	return out
}

// renewRequests asks to renew every lease for ttl.
func renewRequests(ls []lease.Lease, ttl time.Duration) []batchtest.Req {
	reqs := make([]batchtest.Req, len(ls))
	for i, l := range ls {
		reqs[i] = batchtest.Req{Lease: l, TTL: ttl}
	}
	return reqs
}

// TestRenewBatchRoundTrips counts, at the driver, what a RenewBatch of
// 2500 tenures sends: one statement per 1000 (maxBatchChunk) on every
// dialect, each in a transaction of its own on MySQL, which adds a read
// only to the transactions whose chunk had a tenure that was not renewed.
func TestRenewBatchRoundTrips(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		ctx := context.Background()
		var c counter
		l, err := New(countingDB(t, s, &c), WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		const n = 2500
		chunks := (n + maxBatchChunk - 1) / maxBatchChunk
		held := acquireMany(t, l, fmt.Sprintf("rt-%d/", time.Now().UnixNano()), "a", n)

		check := func(what string, reqs []batchtest.Req, lost map[int]bool, maxStmts, wantTxs int) {
			t.Helper()
			c.take()
			res := batchtest.RenewBatch(ctx, l, reqs)
			stmts, txs := c.take()
			bad := 0
			for i, r := range res {
				if (r.Err == nil) == lost[i] || (r.Err != nil && !errors.Is(r.Err, lease.ErrLost)) {
					if bad++; bad <= 3 {
						t.Errorf("%s: request %d: %v (lost: %v)", what, i, r.Err, lost[i])
					}
				}
			}
			t.Logf("%s: %d requests, %d statements, %d transactions", what, len(reqs), len(stmts), txs)
			if len(stmts) < chunks || len(stmts) > maxStmts || txs != wantTxs {
				t.Errorf("%s: %d statements in %d transactions, want %d to %d statements in %d", what, len(stmts), txs, chunks, maxStmts, wantTxs)
			}
			tokens := map[int64]bool{}
			for _, st := range stmts {
				if st.err != nil {
					t.Errorf("%s: a statement failed: %v", what, st.err)
				}
				checkNoAppClock(t, what, st, tokens)
			}
		}
		wantTxs := 0
		if s.dialect == MySQL {
			wantTxs = chunks
		}
		check("all intact", renewRequests(held, time.Minute), nil, chunks, wantTxs)

		// Ten released, in whichever chunks their keys fall: on MySQL
		// those chunks' transactions read the rows back.
		lost := map[int]bool{}
		for i := range 10 {
			if err := l.Release(ctx, held[i]); err != nil {
				t.Fatal(err)
			}
			lost[i] = true
		}
		maxStmts := chunks
		if s.dialect == MySQL {
			maxStmts = 2 * chunks
		}
		check("ten released", renewRequests(held, 2*time.Minute), lost, maxStmts, wantTxs)
	})
}

// errInjected is the store error TestRenewBatchFailureIsNotLost injects.
var errInjected = errors.New("injected store failure")

// isBatchStatement reports whether q is a batch renewal's statement.
func isBatchStatement(q string) bool {
	return strings.Contains(q, "json_each") || strings.Contains(q, "json_array_elements") || strings.Contains(q, "JSON_TABLE")
}

// TestRenewBatchFailureIsNotLost checks that a store error is reported as
// an error, never as lease.ErrLost: on a closed pool, and when a batch
// statement fails. When the first statement fails every request has the
// store's error; when a later one does, the earlier statements' renewals
// are reported (and were made), and the rest have the store's error and
// were left as they were.
func TestRenewBatchFailureIsNotLost(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		ctx := context.Background()
		for _, failAt := range []int{1, 2} {
			t.Run(fmt.Sprintf("statement-%d-fails", failAt), func(t *testing.T) {
				var c counter
				l, err := New(countingDB(t, s, &c), WithTable(s.table))
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				setBatchChunk(l, 2)
				held := acquireMany(t, l, fmt.Sprintf("fail-%d/", time.Now().UnixNano()), "a", 7)
				var sent atomic.Int64
				c.mu.Lock()
				c.fail = func(q string) error {
					if isBatchStatement(q) && sent.Add(1) == int64(failAt) {
						return errInjected
					}
					return nil
				}
				c.mu.Unlock()
				res := batchtest.RenewBatch(ctx, l, renewRequests(held, 3*time.Minute))
				c.mu.Lock()
				c.fail = nil
				c.mu.Unlock()

				renewed := 0
				for i, r := range res {
					row, err := l.Inspect(ctx, held[i].Name)
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case r.Err == nil:
						renewed++
						if !row.Expires.Equal(r.Lease.Expires) {
							t.Errorf("request %d: reported renewed to %v, the row expires %v", i, r.Lease.Expires, row.Expires)
						}
					case errors.Is(r.Err, lease.ErrLost):
						t.Errorf("request %d: a store failure reported as a lost lease: %v", i, r.Err)
					case !errors.Is(r.Err, errInjected):
						t.Errorf("request %d: %v, want the injected error", i, r.Err)
					case !row.Expires.Equal(held[i].Expires):
						t.Errorf("request %d failed with %v, but its row's expiry moved from %v to %v", i, r.Err, held[i].Expires, row.Expires)
					}
				}
				// The tenures go in order of key, two a statement.
				if want := 2 * (failAt - 1); renewed != want {
					t.Errorf("%d requests renewed before statement %d failed, want %d", renewed, failAt, want)
				}
				t.Logf("statement %d failed: %d of %d renewed", failAt, renewed, len(res))
			})
		}

		t.Run("closed-pool", func(t *testing.T) {
			var c counter
			db := countingDB(t, s, &c)
			l, err := New(db, WithTable(s.table))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			held := acquireMany(t, l, fmt.Sprintf("closed-%d/", time.Now().UnixNano()), "a", 3)
			db.Close()
			for i, r := range batchtest.RenewBatch(ctx, l, renewRequests(held, time.Minute)) {
				if r.Err == nil || errors.Is(r.Err, lease.ErrLost) || !errors.Is(r.Err, errClosedPool) {
					t.Errorf("request %d on a closed pool: %v, want the closed pool's error", i, r.Err)
				}
			}
		})
	})
}

// TestMySQLJSONTableVersions checks which MySQL-dialect servers RenewBatch
// takes to have JSON_TABLE.
func TestMySQLJSONTableVersions(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true,
		"10.6.0-MariaDB":             true,
		"11.4.2-MariaDB-log":         true,
		"10.5.23-MariaDB":            false,
		"8.0.36":                     true,
		"8.0.4-rc-log":               true,
		"8.0.3-rc":                   false,
		"8.4.0":                      true,
		"9.1.0":                      true,
		"5.7.44-log":                 false,
		"":                           false,
		"unknown":                    false,
	} {
		if got := mysqlJSONTable(v); got != want {
			t.Errorf("mysqlJSONTable(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestRenewBatchScale, when LEASE_SQL_SCALE=N is set, acquires N leases
// on each dialect and times one sweep that renews them all with single
// Renews (32 at a time, a pool's worth) and one with RenewBatch (one call,
// and calls of 500 as lease.Run's renewer makes), logging the round trips
// (statements, plus BEGIN and COMMIT of each transaction) and the time.
// It asserts only that every renewal succeeded.
func TestRenewBatchScale(t *testing.T) {
	t.Parallel()
	n, _ := strconv.Atoi(os.Getenv("LEASE_SQL_SCALE"))
	if n <= 0 {
		t.Skip("set LEASE_SQL_SCALE=N to renew N leases per dialect")
	}
	allStores(t, func(t *testing.T, s *testStore) {
		ctx := context.Background()
		var c counter
		db := countingDB(t, s, &c)
		db.SetMaxOpenConns(DefaultMaxOpenConns)
		db.SetMaxIdleConns(DefaultMaxIdleConns)
		l, err := New(db, WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		held := acquireMany(t, l, "scale/", "a", n)
		c.take()

		report := func(what string, start time.Time, failed int) {
			elapsed := time.Since(start)
			stmts, txs := c.take()
			t.Logf("%-10s %-28s %6d leases  %6d round trips (%d statements, %d transactions)  %8.1fms", s.name, what, n, len(stmts)+2*txs, len(stmts), txs, float64(elapsed.Microseconds())/1000)
			if failed > 0 {
				t.Errorf("%s: %d of %d renewals failed", what, failed, n)
			}
		}

		// Single Renews, 32 at a time.
		var failed atomic.Int64
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range DefaultMaxOpenConns {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					ls, err := l.Renew(ctx, held[i], time.Minute)
					if err != nil {
						failed.Add(1)
						continue
					}
					held[i] = ls
				}
			})
		}
		wg.Wait()
		report("single Renews (32 at once)", start, int(failed.Load()))

		count := func(res []batchtest.Res) int {
			bad := 0
			for _, r := range res {
				if r.Err != nil {
					bad++
				}
			}
			return bad
		}
		start = time.Now()
		report("RenewBatch (one call)", start, count(batchtest.RenewBatch(ctx, l, renewRequests(held, time.Minute))))

		start = time.Now()
		bad := 0
		for i := 0; i < n; i += 500 {
			bad += count(batchtest.RenewBatch(ctx, l, renewRequests(held[i:min(i+500, n)], time.Minute)))
		}
		report("RenewBatch (calls of 500)", start, bad)
	})
}
