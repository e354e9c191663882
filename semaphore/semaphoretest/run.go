package semaphoretest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Outcome is how a case ended.
type Outcome int

// The outcomes of a case.
const (
	// Passed: the semaphore kept the promise the case checks.
	Passed Outcome = iota + 1
	// Failed: the promise was broken; Result.Reason says how.
	Failed
	// Skipped: the case did not run (the run's context ended first).
	Skipped
)

// String names the outcome: pass, fail or skip.
func (o Outcome) String() string {
	switch o {
	case Passed:
		return "pass"
	case Failed:
		return "fail"
	case Skipped:
		return "skip"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the outcome of one case.
type Result struct {
	// Case is the case's sentence, as in Cases.
	Case    string
	Outcome Outcome
	// Reason is the failure or skip message (empty for Passed).
	Reason string
	// Log holds every line the case logged, failures included.
	Log     []string
	Elapsed time.Duration
}

// Case is one case of the suite: the promise it checks.
type Case struct{ Name string }

// Cases returns the suite's cases, in the order Check reports them.
func Cases() []Case {
	out := make([]Case, len(cases))
	for i, c := range cases {
		out[i] = Case{Name: c.name}
	}
	return out
}

type testCase struct {
	name string
	fn   func(ctx context.Context, t testing.TB, s *suite)
}

// cases is the suite.
var cases = []testCase{
	{"never more than N holders at once", atMostN},
	{"tokens strictly increase per slot", tokensIncrease},
	{"a crashed holder's slot frees within the ttl plus the expiry lag", crashedSlotFrees},
	{"a waiter gets a freed slot", waiterGetsFreedSlot},
	{"capacity changes keep the rule", capacityChanges},
}

// Run runs every case against h's store as parallel subtests of t, one
// per case, named by the case's sentence, and fails t on any broken
// promise.
func Run(t *testing.T, h Harness) {
	t.Helper()
	h, err := h.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{h: h}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if r := runCase(t.Context(), s, c, t); r.Outcome == Skipped {
				t.Skip(r.Reason)
			}
		})
	}
}

// Check runs every case against h's store without the testing package,
// all at once, and returns one Result per case in the order of Cases.
// ctx bounds the whole run; each case is bounded by h.Timeout.
func Check(ctx context.Context, h Harness) []Result {
	h, err := h.withDefaults()
	if err != nil {
		return []Result{{Case: "harness", Outcome: Failed, Reason: err.Error()}}
	}
	s := &suite{h: h}
	results := make([]Result, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		if ctx.Err() != nil {
			results[i] = Result{Case: c.name, Outcome: Skipped, Reason: "not run: " + ctx.Err().Error()}
			continue
		}
		wg.Go(func() { results[i] = runCase(ctx, s, c, nil) })
	}
	wg.Wait()
	return results
}

// runCase runs c in a goroutine of its own, bounded by the harness's
// timeout. With parent set (Run), the case's log lines and failures go
// to parent as they happen; without (Check), they are only collected.
func runCase(ctx context.Context, s *suite, c testCase, parent *testing.T) Result {
	ctx, cancel := context.WithTimeout(ctx, s.h.Timeout)
	defer cancel()
	ct := &caseT{name: c.name, ctx: ctx, parent: parent}
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
				buf := make([]byte, 16<<10)
				ct.Errorf("panic: %v\n%s", r, buf[:runtime.Stack(buf, false)])
			}
		}()
		c.fn(ctx, ct, s)
		if ctx.Err() != nil {
			ct.Errorf("the case took longer than Harness.Timeout (%s)", s.h.Timeout)
		}
	}()
	<-done // every case returns once ctx ends: its calls honour it
	return ct.finish(time.Since(start))
}

type suite struct {
	h   Harness
	seq atomic.Uint64
}

// name returns a semaphore name no other case or run uses.
func (s *suite) name(label string) string {
	return fmt.Sprintf("%s%d/%s", s.h.Prefix, s.seq.Add(1), label)
}

// locker returns a new Locker on the store, closed when the case ends.
func (s *suite) locker(t testing.TB) lease.Locker {
	t.Helper()
	l := s.h.New(t)
	if l == nil {
		t.Fatal("Harness.New returned nil")
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// caseT is the testing.TB a case gets. Fatal and Skip end the case's
// goroutine; lines go to the parent subtest, when there is one, as they
// come. The embedded TB (the subtest under Run, nil under Check) serves
// the methods it does not override.
type caseT struct {
	testing.TB
	name   string
	ctx    context.Context
	parent *testing.T

	mu       sync.Mutex
	ended    bool
	failed   bool
	skipped  bool
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

func (t *caseT) finish(elapsed time.Duration) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	r := Result{Case: t.name, Log: t.log, Elapsed: elapsed, Reason: strings.Join(t.reason, "\n")}
	switch {
	case t.failed:
		r.Outcome = Failed
	case t.skipped:
		r.Outcome = Skipped
	default:
		r.Outcome, r.Reason = Passed, ""
	}
	return r
}
