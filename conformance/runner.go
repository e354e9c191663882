package conformance

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Outcome is how a case ended.
type Outcome int

// The outcomes of a case.
const (
	// Passed: the store kept the promise the case checks.
	Passed Outcome = iota + 1
	// Failed: the store broke the promise; Result.Reason says how.
	Failed
	// Skipped: the case does not apply (an optional interface the Locker
	// lacks, a fault the Harness cannot inject); Result.Reason says why.
	Skipped
	// Errored: the case could not be judged, because the store failed in
	// a way the case does not test (a connection refused, too many
	// clients); Result.Reason has the error. It is not a broken promise.
	Errored
	// Untested: the case could not be judged, because its own timing
	// preconditions were not met (a call was answered after the lease's
	// Deadline, a step ran later than the ttl allows, on a loaded machine
	// or a slow store); Result.Reason has the timings and what to change
	// (usually a longer Harness.TTL). It is not a broken promise.
	Untested
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return "pass"
	case Failed:
		return "fail"
	case Skipped:
		return "skip"
	case Errored:
		return "error"
	case Untested:
		return "untested"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the outcome of one case of the suite.
type Result struct {
	// Case is the case's sentence, such as "old owner cannot release after
	// takeover", and Contract the contract line it checks (see Cases).
	Case, Contract string
	Outcome        Outcome
	// Reason is the failure, error or skip message (empty for Passed).
	Reason string
	// Log holds every line the case logged, failures included.
	Log     []string
	Elapsed time.Duration
}

// Check runs every case of the suite against h's store without the
// testing package, and returns one Result per case in the suite's order.
// It is for tools, such as "lease check", that report on a store outside
// "go test". Cases run up to h.Parallel at a time (one at a time when
// h.Advance is set); each is bounded by its own timeout, after which it is
// reported as failed and abandoned. ctx bounds the whole run: cases not
// started when it ends are reported as skipped, and cases it cuts short
// as Errored (what failed after ctx ended is no verdict on the store).
//
// A case whose store call failed with an error that matches none of the
// lease sentinels (a refused connection, a timeout, too many clients),
// where the case needed the call to succeed, is Errored, not Failed: the
// store could not be judged, which is not a broken promise.
func Check(ctx context.Context, h Harness) []Result {
	return check(ctx, h, cases)
}

// checkOnly is Check of the cases named, in the suite's order: for the
// suite's own tests, which show each case failing a store broken in its
// way without running every other case against it.
func checkOnly(ctx context.Context, h Harness, names ...string) []Result {
	var picked []testCase
	for _, c := range cases {
		if slices.Contains(names, c.name) {
			picked = append(picked, c)
		}
	}
	return check(ctx, h, picked)
}

// check runs cases as Check describes.
func check(ctx context.Context, h Harness, cases []testCase) []Result {
	h, err := h.withDefaults()
	if err != nil {
		return []Result{{Case: "harness", Outcome: Errored, Reason: err.Error()}}
	}
	s := newSuite(h)
	results := make([]Result, len(cases))
	par := h.Parallel
	if h.Advance != nil {
		par = 1
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, c := range cases {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i] = Result{Case: c.name, Contract: c.contract, Outcome: Skipped, Reason: "not run: " + ctx.Err().Error()}
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = runCase(ctx, s, c, nil)
		}()
	}
	wg.Wait()
	return results
}

// Run runs the whole suite against h's store as subtests of t, one per
// case, named by the case's sentence. It fails t on any broken promise.
//
// With h.Advance unset, subtests run in parallel (go test's -parallel
// bounds them) and the suite takes a few multiples of h.TTL plus the
// concurrency and history checks: under a minute on a fast store.
func Run(t *testing.T, h Harness) {
	t.Helper()
	h, err := h.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := newSuite(h)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if h.Advance == nil {
				t.Parallel()
			}
			r := runCase(t.Context(), s, c, t)
			switch r.Outcome {
			case Skipped:
				t.Skip(r.Reason)
			case Untested:
				// Not a broken promise: the machine or the store was too
				// slow for the case's timings this time.
				t.Skip("could not test: " + r.Reason)
			case Errored:
				t.Fatalf("could not test this promise, the store failed: %s", r.Reason)
			}
		})
	}
}

// runCase runs c in a goroutine of its own, bounded by c's timeout. With
// parent set (Run), the case's log lines and failures go to parent as they
// happen; without (Check), they are only collected.
func runCase(ctx context.Context, s *suite, c testCase, parent *testing.T) Result {
	timeout := c.timeout(s.h)
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ct := &caseT{name: c.name, ctx: ctx, outer: outer, parent: parent, fn: funcName(c.fn),
		about: fmt.Sprintf(" [contract line %s; Harness TTL %s, Granularity %s, ExpiryLag %s]", c.contract, s.h.TTL, s.h.Granularity, s.h.ExpiryLag)}
	if parent != nil {
		ct.TB = parent
	}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ct.runCleanups()
		defer func() {
			if r := recover(); r != nil {
				ct.Errorf("panic: %v\n%s", r, stack())
			}
		}()
		c.fn(ct, s)
	}()
	select {
	case <-done:
	case <-time.After(timeout + time.Second):
		// The case ignored its context's end (a store call that does not
		// honour it): report and abandon it.
		ct.Errorf("the case did not finish within its timeout of %s: a store call ignored its context's deadline", timeout)
	}
	return ct.finish(c, time.Since(start))
}

func stack() string {
	buf := make([]byte, 16<<10)
	return string(buf[:runtime.Stack(buf, false)])
}

// caseT is the testing.TB a case gets. It runs in the case's own
// goroutine: Fatal and Skip end that goroutine, and it forwards to the
// subtest only while the subtest is live. The embedded TB (the subtest's
// *testing.T under Run, nil under Check) serves the rarely used methods
// it does not override.
type caseT struct {
	testing.TB
	name   string
	ctx    context.Context
	outer  context.Context // the whole run's: its end is no verdict on the store
	parent *testing.T

	// about is appended to every failure: the contract line and the
	// Harness's timings. fn is the case's function, by name.
	about, fn string

	mu       sync.Mutex
	ended    bool // finish ran: drop late calls
	failed   bool
	skipped  bool
	errored  bool
	untested bool
	reason   []string
	log      []string
	cleanups []func()
}

var _ testing.TB = (*caseT)(nil)

func (t *caseT) record(line string, fail, skip bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	if fail && t.outer != nil && t.outer.Err() != nil {
		// The run as a whole was cut short (Check's ctx ended) while the
		// case ran: what went wrong after that says nothing about the
		// store.
		line = fmt.Sprintf("cut short (%v): %s", context.Cause(t.outer), line)
		t.errored = true
		t.log = append(t.log, line)
		t.reason = append(t.reason, line)
		if t.parent != nil {
			t.parent.Error(line)
		}
		return
	}
	if fail {
		line = t.where() + line + t.about
	}
	t.log = append(t.log, line)
	if fail || skip {
		t.reason = append(t.reason, line)
	}
	t.failed = t.failed || fail
	t.skipped = t.skipped || skip
	if t.parent != nil && !skip {
		if fail {
			t.parent.Error(line)
		} else {
			t.parent.Log(line)
		}
	}
}

func (t *caseT) Helper()                  {}
func (t *caseT) Name() string             { return t.name }
func (t *caseT) Context() context.Context { return t.ctx }
func (t *caseT) Log(args ...any)          { t.record(fmt.Sprint(args...), false, false) }
func (t *caseT) Logf(format string, args ...any) {
	t.record(fmt.Sprintf(format, args...), false, false)
}
func (t *caseT) Error(args ...any) { t.record(fmt.Sprint(args...), true, false) }
func (t *caseT) Errorf(format string, args ...any) {
	t.record(fmt.Sprintf(format, args...), true, false)
}
func (t *caseT) Fail()                             { t.record("failed", true, false) }
func (t *caseT) FailNow()                          { t.Fail(); runtime.Goexit() }
func (t *caseT) Fatal(args ...any)                 { t.Error(args...); runtime.Goexit() }
func (t *caseT) Fatalf(format string, args ...any) { t.Errorf(format, args...); runtime.Goexit() }
func (t *caseT) Skip(args ...any)                  { t.record(fmt.Sprint(args...), false, true); runtime.Goexit() }
func (t *caseT) Skipf(format string, args ...any) {
	t.record(fmt.Sprintf(format, args...), false, true)
	runtime.Goexit()
}
func (t *caseT) SkipNow() { t.Skip("skipped") }

func (t *caseT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *caseT) Skipped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped
}

func (t *caseT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *caseT) TempDir() string {
	dir, err := os.MkdirTemp("", "lease-conformance-*")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// storeError marks the case as unable to judge the store: the store failed
// in a way the case does not test. It ends the case.
func (t *caseT) storeError(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.mu.Lock()
	if !t.ended {
		t.errored = true
		t.log = append(t.log, line)
		t.reason = append(t.reason, line)
	}
	t.mu.Unlock()
	runtime.Goexit()
}

// couldNotTest marks the case as unable to judge the store, because its
// own timing preconditions were not met. It ends the case.
func (t *caseT) couldNotTest(format string, args ...any) {
	line := t.where() + fmt.Sprintf(format, args...)
	t.mu.Lock()
	if !t.ended {
		t.untested = true
		t.log = append(t.log, line)
		t.reason = append(t.reason, line)
	}
	t.mu.Unlock()
	runtime.Goexit()
}

// where is "file.go:line (case): " for the line of the case's own
// function that led to the failure, with ", in file.go:line (helper)" for
// the outermost of the suite's shared helpers it called on the way, if
// any: a failure says where and why rather than pointing at the runner.
func (t *caseT) where() string {
	pcs := make([]uintptr, 48)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var helper, last string
	for {
		f, more := frames.Next()
		file := f.File[strings.LastIndexByte(f.File, '/')+1:]
		fn := caseFunc(f.Function)
		switch {
		case !strings.Contains(f.Function, "/conformance.") || file == "runner.go":
		case fn == t.fn:
			if helper != "" {
				return fmt.Sprintf("%s:%d (%s, in %s): ", file, f.Line, fn, helper)
			}
			return fmt.Sprintf("%s:%d (%s): ", file, f.Line, fn)
		case fn == "failCall" || fn == "couldNotTest" || fn == "StoreError":
			// Reporters, not checks: the line that called them says more.
		default:
			helper = fmt.Sprintf("%s:%d (%s)", file, f.Line, fn)
			last = helper
		}
		if !more {
			break
		}
	}
	if last != "" { // a goroutine the case started: no case frame above it
		return last + ": "
	}
	return ""
}

// caseFunc is the suite's function named by a runtime function name: for
// ".../conformance.caseName.func1" (a closure) caseName, and for
// ".../conformance.(*suite).helper" helper.
func caseFunc(full string) string {
	_, fn, _ := strings.Cut(full, "/conformance.")
	if _, m, ok := strings.Cut(fn, ")."); ok {
		fn = m
	}
	fn, _, _ = strings.Cut(fn, ".")
	return fn
}

// funcName is caseFunc of f, a case's function.
func funcName(f func(testing.TB, *suite)) string {
	return caseFunc(runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name())
}

// noteStoreError is storeError for a goroutine other than the case's: it
// records the store's failure and lets the caller return.
func (t *caseT) noteStoreError(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		t.errored = true
		t.log = append(t.log, line)
		t.reason = append(t.reason, line)
	}
}

// storeFailed reports whether the case has met a store failure.
func storeFailed(t testing.TB) bool {
	ct, ok := t.(*caseT)
	if !ok {
		return false
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.errored
}

func (t *caseT) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		f()
	}
}

func (t *caseT) finish(c testCase, elapsed time.Duration) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	r := Result{Case: c.name, Contract: c.contract, Log: t.log, Elapsed: elapsed, Reason: strings.Join(t.reason, "\n")}
	switch {
	case t.failed:
		r.Outcome = Failed
	case t.errored:
		r.Outcome = Errored
	case t.untested:
		r.Outcome = Untested
	case t.skipped:
		r.Outcome = Skipped
	default:
		r.Outcome, r.Reason = Passed, ""
	}
	return r
}
