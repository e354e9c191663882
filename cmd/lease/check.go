//go:build !lease_nocheck

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/driver"
)

// exitUntested is lease check's exit code when the store could not be
// tested: it could not be opened, failed in cases that needed it to
// answer, or the run did not finish within --timeout. It is not a verdict
// on the contract.
const exitUntested = 4

// serverClock reports whether the built-in backend of scheme judges expiry
// by its server's clock alone, in every statement or script, with no
// clock of the client's in it: PostgreSQL (clock_timestamp()), MySQL and
// MariaDB (UTC_TIMESTAMP(6)), Redis (TIME and PEXPIRE), etcd (its
// lessor), and memory (the store's Clock). SQLite judges by its machine's
// clock, and a store of another scheme is not this program's to vouch
// for.
func serverClock(scheme string) bool {
	switch scheme {
	case "postgres", "postgresql", "mysql", "etcd", "etcds", "mem":
		return true
	}
	return strings.HasPrefix(scheme, "redis")
}

// storeTimings are the conformance Harness timings that suit a scheme:
// the shortest ttl the suite may use, the store's ttl granularity and how
// late it may notice expiry. The ttls are longer than the backends' own
// tests use, since the store may be across a network: a store that keeps
// the contract passes with any ttl it can answer well within.
func storeTimings(scheme string) (ttl, granularity, lag time.Duration) {
	if scheme == "etcd" {
		// Whole-second leases, a minimum of 2s, expired by a lessor that
		// looks every 500ms.
		return 2 * time.Second, time.Second, time.Second
	}
	return time.Second, 0, 0
}

const checkHelp = `check [flags] [URL]

Runs the conformance suite, every promise of the lease contract, against the
store at URL (default: the --backend store), in this process, and prints one
line per promise: PASS, FAIL (the store broke it), SKIP (it does not apply:
an optional interface the store lacks, faults on a store not reached over
TCP) or ERROR (the store failed, so the promise could not be judged).

For stores reached over TCP (postgres, mysql, redis, etcd) the fault cases
run too: the suite dials the store through a proxy of its own that stalls,
delays, loses replies and resets connections, and checks that every call
still returns by its deadline as a store failure, never as held or lost.
--no-faults leaves them out.

The suite writes leases under a random prefix (after --prefix, if given).
When it is done it force-releases (or releases) every lease still held
under that prefix, so nothing it took stays held in the store; the rows or
keys that record the names' tokens stay, as for any name (lease cleanup
deletes a SQL store's). Opening the store gives up after the global
--timeout (30s); the whole run after check's --timeout.

Exit status: 0 the store keeps every promise checked; 1 it broke at least
one (do not rely on it); 2 usage; 4 it could not be tested (unreachable,
failed during the run, or the run did not finish in time).`

// checkOptions are lease check's flags, once parsed.
type checkOptions struct {
	raw         string // the store's URL, with its password
	scheme      string
	ttl         time.Duration
	granularity time.Duration
	lag         time.Duration
	tenures     int
	prefix      string // the suite's prefix: --prefix and a random part
	parallel    int
	timeout     time.Duration
	faults      bool
	verbose     bool
	asJSON      bool
}

// check is "lease check [flags] [URL]".
func (g *globals) check(ctx context.Context, args []string) error {
	fs := g.flags("check", checkHelp)
	ttl := fs.Duration("ttl", 0, "shortest lease the suite may use (default 1s, 2s for etcd); the suite takes a few multiples of it")
	gran := fs.Duration("granularity", -1, "how far the store may round a ttl up (default by scheme: 1s etcd, else 1ms)")
	lag := fs.Duration("expiry-lag", -1, "how late the store may notice an expiry (default by scheme: 1s etcd, else 0)")
	tenures := fs.Int("tenures", 0, "tenures the token-order test starts on one name (default 2000)")
	prefix := fs.String("prefix", "", "put every lease name the suite uses under this prefix (a random part is always added)")
	parallel := fs.Int("parallel", 0, "cases run at once (default 8; 1 for sqlite, whose one writer at a time would starve a renewal)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on the whole run after this long (exit 4)")
	noFaults := fs.Bool("no-faults", false, "do not run the fault cases through a proxy, even for a store reached over TCP")
	asJSON := fs.Bool("json", false, "print the results as one JSON object instead of lines")
	verbose := fs.Bool("v", false, "print every log line of the suite, not only the reasons of cases that did not pass")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 1 {
		return usageErrorf("check takes at most one URL, got %d arguments", fs.NArg())
	}
	raw := fs.Arg(0)
	if raw == "" {
		var err error
		if raw, err = g.backendURL(); err != nil {
			return err
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return usageErrorf("check: %s is not a backend URL (want e.g. sqlite:///path/lease.db or redis://host:6379)", driver.Redact(raw))
	}
	o := checkOptions{raw: raw, scheme: strings.ToLower(u.Scheme), tenures: *tenures, timeout: *timeout,
		faults: !*noFaults, verbose: *verbose, asJSON: *asJSON}
	o.ttl, o.granularity, o.lag = storeTimings(o.scheme)
	if *ttl > 0 {
		o.ttl = *ttl
	}
	if *gran >= 0 {
		o.granularity = *gran
	}
	if *lag >= 0 {
		o.lag = *lag
	}
	switch {
	case *ttl < 0:
		return usageErrorf("check: --ttl must be positive")
	case *tenures < 0:
		return usageErrorf("check: --tenures must not be negative")
	case *timeout <= 0:
		return usageErrorf("check: --timeout must be positive")
	case *parallel < 0:
		return usageErrorf("check: --parallel must not be negative")
	case *parallel == 0 && o.scheme == "sqlite":
		// SQLite lets one writer in at a time and its busy handler is not
		// fair: with eight cases writing at once, a renewal can wait past
		// its lease's deadline on a loaded machine. One at a time, the
		// suite checks the contract rather than the lock's fairness.
		o.parallel = 1
	case *parallel == 0:
		o.parallel = 8
	default:
		o.parallel = *parallel
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	o.prefix = *prefix + "lease-check-" + hex.EncodeToString(b[:]) + "/"
	g.backend = raw
	return g.runCheck(ctx, o)
}

// checker runs the suite for one lease check.
type checker struct {
	g      *globals
	o      checkOptions
	secret *strings.Replacer // masks the URL's secrets in any text

	mu     sync.Mutex
	opened []lease.Locker // every Locker the harness opened
	first  lease.Locker   // the first, from lease.Open
}

// runCheck opens the store once, so that a bad URL or an unreachable
// store is one line, then runs the suite, cleans up and reports.
func (g *globals) runCheck(ctx context.Context, o checkOptions) error {
	c := &checker{g: g, o: o, secret: secretMasker(o.raw)}
	first, err := g.open(ctx)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.code == exitUsage {
			return &exitError{code: exitUsage, msg: c.mask(ee.msg)}
		}
		return &exitError{code: exitUntested, msg: c.mask(fmt.Sprintf("could not test the store: %v", err))}
	}
	c.first = first
	c.opened = append(c.opened, first)

	h := conformance.Harness{
		New:         func(t testing.TB) lease.Locker { return c.newLocker(t, o.raw) },
		TTL:         o.ttl,
		Granularity: o.granularity,
		ExpiryLag:   o.lag,
		Tenures:     o.tenures,
		Prefix:      o.prefix,
		Parallel:    o.parallel,
	}
	if serverClock(o.scheme) {
		// A Locker on a machine whose clock is off is an ordinary Locker
		// on these stores, so the clock-skew case runs rather than
		// reporting the store as proven on one clock only.
		h.NewSkewed = func(t testing.TB, _ time.Duration) lease.Locker { return c.newLocker(t, o.raw) }
	}
	noFaults := ""
	if !o.faults {
		noFaults = "left out (--no-faults)"
	} else if addr, why := tcpAddr(o.raw); why != "" {
		noFaults = why
	} else {
		h.Addr = addr
		h.NewAt = func(t testing.TB, at string) lease.Locker { return c.newLocker(t, viaAddr(o.raw, at)) }
	}
	if !o.asJSON {
		faults := "with fault cases"
		if noFaults != "" {
			faults = "without fault cases: " + noFaults
		}
		fmt.Fprintf(g.stdout, "checking %s against the lease contract (ttl %s, %s)\n", c.display(), o.ttl, faults)
	}

	start := time.Now()
	// An interrupt ends the run, not the process, so that the leases the
	// suite holds are still ended below; a second one kills it.
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	runCtx, cancel := context.WithTimeoutCause(sigCtx, o.timeout, errors.New("timeout"))
	results := conformance.Check(runCtx, h)
	cut := ""
	switch {
	case sigCtx.Err() != nil:
		cut = "the run was interrupted"
	case runCtx.Err() != nil:
		cut = fmt.Sprintf("the run did not finish within --timeout %s", o.timeout)
	}
	cancel()
	stop()
	elapsed := time.Since(start)
	for i := range results {
		r := &results[i]
		if noFaults != "" && r.Outcome == conformance.Skipped && strings.Contains(r.Contract, "faults") {
			r.Reason = "fault case " + noFaults
		}
		r.Reason = c.mask(r.Reason)
		for j := range r.Log {
			r.Log[j] = c.mask(r.Log[j])
		}
	}
	cleaned, cleanErr := c.cleanup(ctx)
	c.closeAll()
	return c.report(results, elapsed, cut, cleaned, cleanErr)
}

// newLocker opens a Locker on raw for the suite, within --timeout, and
// closes it when the case ends (the suite closes most itself; closing is
// idempotent). For mem://, where every Open is a new empty store, the
// Lockers after the first share the first's store. A store that cannot be
// opened ends the case as unable to judge the store.
func (c *checker) newLocker(t testing.TB, raw string) lease.Locker {
	c.mu.Lock()
	first := c.first
	c.mu.Unlock()
	var l lease.Locker
	if m, ok := first.(*memory.Locker); ok && raw == c.o.raw {
		l = m.Share()
	} else {
		ctx, cancel := c.g.bound(t.Context(), c.g.timeout, "--timeout")
		defer cancel()
		var err error
		l, err = bounded(ctx, func(ctx context.Context) (lease.Locker, error) { return lease.Open(ctx, raw) },
			func(l lease.Locker) { _ = l.Close() })
		if err != nil {
			err = c.g.storeError(ctx, err)
			conformance.StoreError(t, "opening "+driver.Redact(raw), errors.New(c.mask(err.Error())))
			return nil
		}
	}
	c.mu.Lock()
	c.opened = append(c.opened, l)
	c.mu.Unlock()
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// closeAll closes every Locker the harness opened, those of cases the
// suite abandoned included.
func (c *checker) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.opened {
		_ = l.Close()
	}
	c.opened = nil
}

// cleanupReport says what lease check did about the leases the suite left.
type cleanupReport struct {
	Released int    `json:"released"`
	Note     string `json:"note,omitempty"`
}

// cleanup ends every tenure still held under the suite's prefix:
// force-released where the store implements lease.ForceReleaser, else
// released as its holder would. It needs lease.Lister to find them.
func (c *checker) cleanup(ctx context.Context) (cleanupReport, error) {
	var rep cleanupReport
	opened, err := c.g.open(ctx)
	if err != nil {
		return rep, err
	}
	defer func() { _ = opened.Close() }()
	l := opened
	if m, ok := c.first.(*memory.Locker); ok {
		l = m.Share() // the suite's store, not a new empty one
		defer func() { _ = l.Close() }()
	}
	lister, ok := l.(lease.Lister)
	ok = ok && lease.Can[lease.Lister](l)
	if !ok {
		rep.Note = fmt.Sprintf("the store cannot list leases (%T does not implement lease.Lister): leases the suite left under %q end with their ttl", l, c.o.prefix)
		return rep, nil
	}
	ctx, cancel := c.g.oneShot(ctx)
	defer cancel()
	held, err := bounded(ctx, func(ctx context.Context) ([]lease.Lease, error) { return lister.List(ctx, c.o.prefix) }, nil)
	if errors.Is(err, errors.ErrUnsupported) {
		rep.Note = fmt.Sprintf("the store cannot list leases: leases the suite left under %q end with their ttl", c.o.prefix)
		return rep, nil
	}
	if err != nil {
		return rep, c.g.storeError(ctx, err)
	}
	fr, canForce := l.(lease.ForceReleaser)
	canForce = canForce && lease.Can[lease.ForceReleaser](l)
	var errs []error
	for _, h := range held {
		err = errors.ErrUnsupported
		if canForce {
			_, err = fr.ForceRelease(ctx, h.Name)
		}
		if errors.Is(err, errors.ErrUnsupported) {
			err = l.Release(ctx, h) // as its holder: List gives owner and token
		}
		switch {
		case err == nil:
			rep.Released++
		case errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrLost):
			// Ended on its own meanwhile.
		default:
			errs = append(errs, fmt.Errorf("%q: %w", h.Name, err))
		}
	}
	return rep, c.g.storeError(ctx, errors.Join(errs...))
}

// tcpAddr returns the host:port of the store at raw, through which the
// fault cases reach it, or why the fault cases cannot run on it.
func tcpAddr(raw string) (addr, why string) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "the URL does not parse"
	}
	scheme := strings.ToLower(u.Scheme)
	port, ok := defaultPorts[scheme]
	if !ok {
		return "", fmt.Sprintf("not run: a %s store is not reached over TCP", scheme)
	}
	q := u.Query()
	switch {
	case scheme == "rediss" || q.Get("sslmode") == "verify-full" || q.Get("tls") == "true":
		return "", "not run: the store's TLS certificate would not match the proxy's address"
	case q.Has("host") || q.Has("hostaddr") || q.Has("port"):
		return "", "not run: the URL names its host in the query (a Unix socket, or several hosts)"
	case u.Host == "":
		return "", "not run: the URL names no TCP host"
	}
	host := strings.Split(u.Host, ",")[0] // etcd: the first endpoint
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	return host, ""
}

// defaultPorts are the schemes whose stores are reached over TCP, with the
// port their URLs default to.
var defaultPorts = map[string]string{
	"postgres": "5432", "postgresql": "5432", "mysql": "3306",
	"redis": "6379", "rediss": "6379", "etcd": "2379",
}

// viaAddr is raw with its host (etcd: its endpoints) replaced by addr: the
// same store, database, table and prefix, reached through the suite's
// proxy.
func viaAddr(raw, addr string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = addr
	return u.String()
}

// secretMasker masks, in any text, the secrets of raw: its password (as
// given and decoded) and the values of query parameters named like
// passwords, so that no error a driver quotes shows them.
func secretMasker(raw string) *strings.Replacer {
	var pairs []string
	add := func(s string) {
		if s != "" {
			pairs = append(pairs, s, "xxxxx")
		}
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if c := strings.IndexByte(rest[:at], ':'); c >= 0 {
				add(rest[c+1 : at])
			}
		}
	}
	if u, err := url.Parse(raw); err == nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			add(url.QueryEscape(p))
			add(url.PathEscape(p))
		}
		for k, vs := range u.Query() {
			switch strings.ToLower(k) {
			case "password", "passwd", "pwd", "pass", "sslpassword", "secret", "token", "auth":
				for _, v := range vs {
					add(v)
					add(url.QueryEscape(v))
				}
			}
		}
	}
	return strings.NewReplacer(pairs...)
}

// display is the store's URL for output: as given when it holds no
// secret, else redacted.
func (c *checker) display() string {
	if _, err := url.Parse(c.o.raw); err == nil && c.mask(c.o.raw) == c.o.raw {
		return c.o.raw // mem:// rather than url.URL's mem:
	}
	return driver.Redact(c.o.raw)
}

// mask is s without the store's secrets.
func (c *checker) mask(s string) string { return c.secret.Replace(s) }

// checkJSON is lease check --json's output.
type checkJSON struct {
	Store   string `json:"store"`
	TTL     string `json:"ttl"`
	Prefix  string `json:"prefix"`
	Verdict string `json:"verdict"` // "pass", "fail" or "untested"
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
	Errored int    `json:"errored"`
	// Untested counts the cases whose own timing could not be kept (a
	// loaded machine, a slow store): not broken promises.
	Untested int         `json:"untested"`
	Seconds  float64     `json:"seconds"`
	Cut      string      `json:"cut_short,omitempty"` // why the run did not finish, if it did not
	Cleanup  cleanupJSON `json:"cleanup"`
	Results  []caseJSON  `json:"results"`
}

type cleanupJSON struct {
	cleanupReport
	Error string `json:"error,omitempty"`
}

type caseJSON struct {
	Case     string   `json:"case"`
	Contract string   `json:"contract,omitempty"`
	Outcome  string   `json:"outcome"` // "pass", "fail", "skip", "error" or "untested"
	Reason   string   `json:"reason,omitempty"`
	Duration string   `json:"duration"`
	Seconds  float64  `json:"seconds"`
	Log      []string `json:"log,omitempty"`
}

// report prints the results and returns lease check's verdict.
func (c *checker) report(results []conformance.Result, elapsed time.Duration, cut string, cleaned cleanupReport, cleanErr error) error {
	timedOut := cut != ""
	var n struct{ passed, failed, skipped, errored, untested int }
	var firstError, firstUntested string
	for _, r := range results {
		switch r.Outcome {
		case conformance.Passed:
			n.passed++
		case conformance.Failed:
			n.failed++
		case conformance.Skipped:
			n.skipped++
		case conformance.Untested:
			n.untested++
			if firstUntested == "" {
				firstUntested = r.Case + ": " + firstLine(r.Reason)
			}
		default:
			n.errored++
			if firstError == "" {
				firstError = firstLine(r.Reason)
			}
		}
	}
	verdict := "pass"
	switch {
	case n.failed > 0:
		verdict = "fail"
	case n.errored > 0 || n.untested > 0 || timedOut || n.passed == 0:
		verdict = "untested"
	}
	store := c.display()
	if c.o.asJSON {
		out := checkJSON{Store: store, TTL: c.o.ttl.String(), Prefix: c.o.prefix, Verdict: verdict,
			Passed: n.passed, Failed: n.failed, Skipped: n.skipped, Errored: n.errored, Untested: n.untested,
			Seconds: elapsed.Seconds(), Cut: cut, Cleanup: cleanupJSON{cleanupReport: cleaned}, Results: []caseJSON{}}
		if cleanErr != nil {
			out.Cleanup.Error = c.mask(oneLine(cleanErr.Error()))
		}
		for _, r := range results {
			cj := caseJSON{Case: r.Case, Contract: r.Contract, Outcome: r.Outcome.String(), Reason: r.Reason,
				Duration: r.Elapsed.Round(time.Millisecond).String(), Seconds: r.Elapsed.Seconds()}
			if c.o.verbose {
				cj.Log = r.Log
			}
			out.Results = append(out.Results, cj)
		}
		enc := json.NewEncoder(c.g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		w := c.g.stdout
		for _, r := range results {
			mark := map[conformance.Outcome]string{conformance.Passed: "PASS", conformance.Failed: "FAIL",
				conformance.Skipped: "SKIP", conformance.Errored: "ERROR", conformance.Untested: "UNTESTED"}[r.Outcome]
			if r.Outcome == conformance.Skipped {
				fmt.Fprintf(w, "%-5s  %s: %s\n", mark, r.Case, firstLine(r.Reason))
				continue
			}
			fmt.Fprintf(w, "%-5s  %s (%s)\n", mark, r.Case, r.Elapsed.Round(time.Millisecond))
			lines := r.Log
			if !c.o.verbose {
				lines = nil
				if r.Outcome != conformance.Passed {
					lines = strings.Split(r.Reason, "\n")
				}
			}
			printLines(w, lines)
		}
		switch {
		case cleanErr != nil:
			fmt.Fprintf(w, "cleanup: could not end the leases left under %q: %s\n", c.o.prefix, c.mask(oneLine(cleanErr.Error())))
		case cleaned.Note != "":
			fmt.Fprintf(w, "cleanup: %s\n", cleaned.Note)
		default:
			fmt.Fprintf(w, "cleanup: ended %d leases left held under %q\n", cleaned.Released, c.o.prefix)
		}
		took := elapsed.Round(100 * time.Millisecond)
		switch verdict {
		case "pass":
			fmt.Fprintf(w, "PASS: the store kept all %d promises checked (%d skipped) in %s\n", n.passed, n.skipped, took)
		case "fail":
			fmt.Fprintf(w, "FAIL: the store broke %d of %d promises checked (%d passed, %d skipped, %d could not be tested) in %s\n",
				n.failed, len(results)-n.skipped, n.passed, n.skipped, n.errored+n.untested, took)
		default:
			fmt.Fprintf(w, "ERROR: %d of %d promises could not be tested (%d passed, %d skipped) in %s\n",
				n.errored+n.untested+countNotRun(results, timedOut), len(results), n.passed, n.skipped, took)
		}
	}
	switch verdict {
	case "fail":
		return &exitError{code: exitFailure, msg: fmt.Sprintf("%s does not keep the lease contract: do not rely on it", store)}
	case "untested":
		why := fmt.Sprintf("the store failed in %d cases; the first: %s", n.errored, firstError)
		switch {
		case timedOut:
			why = cut
		case n.errored == 0 && n.untested > 0:
			why = fmt.Sprintf("%d cases could not keep their timing (a loaded machine or a slow store: try a longer --ttl); the first: %s", n.untested, firstUntested)
		case firstError == "":
			why = "no promise could be checked"
		}
		return &exitError{code: exitUntested, msg: c.mask(fmt.Sprintf("could not test %s: %s", store, why))}
	}
	return nil
}

// countNotRun counts the cases a timed-out run never started.
func countNotRun(results []conformance.Result, timedOut bool) int {
	if !timedOut {
		return 0
	}
	n := 0
	for _, r := range results {
		if r.Outcome == conformance.Skipped && strings.HasPrefix(r.Reason, "not run: ") {
			n++
		}
	}
	return n
}

// firstLine is s's first line.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// printLines prints a case's reason or log lines under its result,
// cutting very long ones (a 1024-byte lease name) short.
func printLines(w interface{ Write([]byte) (int, error) }, lines []string) {
	const maxLen = 400
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if r := []rune(l); len(r) > maxLen {
			l = string(r[:maxLen]) + "..."
		}
		fmt.Fprintln(w, "       "+l)
	}
}
