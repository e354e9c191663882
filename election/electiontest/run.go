package electiontest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
)

// Run runs every case of the suite against h's store, one parallel
// subtest per case, named by the promise it checks. It fails t on any
// broken promise.
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
			s.bounded(t, c.fn)
		})
	}
}

type testCase struct {
	name string
	fn   func(ctx context.Context, t *testing.T, s *suite)
}

// cases is the suite.
var cases = []testCase{
	{"one leader at a time among contending candidates", oneLeaderAtATime},
	{"terms strictly increase across leaders however terms end", termsIncrease},
	{"a resigning leader's work returns before the next leader's starts", resignHandsOff},
	{"a leader whose context ends hands off as one that resigns", contextEndHandsOff},
	{"a leader whose Locker is closed without release is replaced within the ttl plus the expiry lag", closedLeaderReplaced},
	{"an observer never sees a term go back and sees no leader when there is none", observerSequence},
	{"started and stopped callbacks pair up exactly, only for the candidate that led", callbacksPair},
	{"the leader's ID and metadata are published with its term", metadataPublished},
	{"one leader at a time across processes", processesOneLeader},
	{"a SIGKILLed leader process is replaced within the ttl plus the expiry lag", killedProcessReplaced},
	{"a leader renewing for several ttls keeps the office while others wait", incumbentStays},
}

type suite struct {
	h   Harness
	seq atomic.Uint64
}

// bounded runs fn with a context that ends after h.Timeout, and fails t if
// the case outlived it. A failing case's own lines report what failed;
// bounded adds, at the end, which function the case is, where, and the
// Harness's timings.
func (s *suite) bounded(t *testing.T, fn func(ctx context.Context, t *testing.T, s *suite)) {
	ctx, cancel := context.WithTimeout(t.Context(), s.h.Timeout)
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the failing case is %s; Harness: TTL %s, ExpiryLag %s, Timeout %s, Prefix %q", caseAt(fn), s.h.TTL, s.h.ExpiryLag, s.h.Timeout, s.h.Prefix)
		}
	})
	fn(ctx, t, s)
	if ctx.Err() != nil && t.Context().Err() == nil {
		t.Fatalf("the case %s took longer than Harness.Timeout (%s; ttl %s, expiry lag %s)", caseAt(fn), s.h.Timeout, s.h.TTL, s.h.ExpiryLag)
	}
}

// locker returns a new Locker on the store, closed when t ends.
func (s *suite) locker(t testing.TB) lease.Locker {
	t.Helper()
	l := s.h.New(t)
	if l == nil {
		t.Fatal("Harness.New returned nil")
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// office returns an office name no other case or run uses.
func (s *suite) office(label string) string {
	return fmt.Sprintf("%s%d/%s", s.h.Prefix, s.seq.Add(1), label)
}

// candidate makes a candidate for office on its own Locker, with the
// suite's ttl.
func (s *suite) candidate(t testing.TB, office, id string, opts ...election.Option) (*election.Candidate, lease.Locker) {
	t.Helper()
	l := s.locker(t)
	c, err := election.NewCandidate(l, office, append([]election.Option{election.WithTTL(s.h.TTL), election.WithID(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, l
}

// running is a Run or Lead call in its own goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// run calls c.Run (or c.Lead when once) with fn in a goroutine whose end
// t's cleanup waits for.
func run(ctx context.Context, t testing.TB, c *election.Candidate, once bool, fn election.Work) *running {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if once {
			r.err = c.Lead(ctx, fn)
		} else {
			r.err = c.Run(ctx, fn)
		}
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// wait waits for r's call to return, until ctx ends, and returns its error.
func (r *running) wait(ctx context.Context, t testing.TB, what string) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		t.Fatalf("%s: the call did not return: %v", what, ctx.Err())
		return nil
	}
}

// events collects a candidate's started and stopped callbacks.
type events struct {
	who    string
	notify chan<- elect // every start is also sent here

	mu   sync.Mutex
	list []event
}

type event struct {
	started bool
	term    election.Term
	err     error
}

// elect is a start, as sent to a case's channel.
type elect struct {
	who  string
	term election.Term
}

// newEvents returns a recorder for candidate who that also sends each
// start to notify, which must be buffered enough for the case.
func newEvents(who string, notify chan<- elect) *events {
	return &events{who: who, notify: notify}
}

// options returns the callbacks that record into e.
func (e *events) options() []election.Option {
	return []election.Option{
		election.OnStartedLeading(func(t election.Term) {
			e.mu.Lock()
			e.list = append(e.list, event{started: true, term: t})
			e.mu.Unlock()
			e.notify <- elect{e.who, t}
		}),
		election.OnStoppedLeading(func(t election.Term, err error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.list = append(e.list, event{term: t, err: err})
		}),
	}
}

func (e *events) snapshot() []event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]event(nil), e.list...)
}

// elected waits for the next start sent to ch.
func elected(ctx context.Context, t testing.TB, what string, ch <-chan elect) elect {
	t.Helper()
	select {
	case got := <-ch:
		return got
	case <-ctx.Done():
		t.Fatalf("%s: nobody was elected: %v", what, ctx.Err())
		return elect{}
	}
}

// noError fails t unless err is nil.
func noError(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// isCancellation reports whether err is nil or only reports a cancelled
// context.
func isCancellation(err error) bool {
	return err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, election.ErrResigned)
}

// caseAt names the case function fn and where it is defined, for a
// failure reported from outside the case's own lines.
func caseAt(fn any) string {
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
	if f == nil {
		return "(unknown)"
	}
	file, line := f.FileLine(f.Entry())
	return fmt.Sprintf("%s (%s:%d)", strings.TrimPrefix(path.Ext(f.Name()), "."), filepath.Base(file), line)
}
