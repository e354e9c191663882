package fencetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease/fence"
)

// Run runs every case against h's checker, one subtest per promise. It
// fails t on any broken promise. The restart case (when h.Restart is set)
// runs first and alone; the others run in parallel after it.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("fencetest: Harness.New is nil")
	}
	if h.Writers <= 0 {
		h.Writers = 8
	}
	if h.Writes <= 0 {
		h.Writes = 25
	}
	if h.Timeout <= 0 {
		h.Timeout = 60 * time.Second
	}
	if h.Prefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		h.Prefix = "fencetest-" + hex.EncodeToString(b[:]) + "/"
	}
	s := &suite{h: h}
	if h.Restart != nil {
		t.Run("the maximum survives a restart of the store", func(t *testing.T) { s.bounded(t, restartKeepsMax) })
	}
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

// cases is every parallel subtest, in the order of the package
// documentation.
var cases = []testCase{
	{"a stale token is refused with the winning token", staleRefused},
	{"an equal token is accepted", equalAccepted},
	{"a higher token is accepted and remembered", higherRemembered},
	{"a refused write changes nothing", refusedChangesNothing},
	{"Check raises the maximum that writes are held to", checkRaises},
	{"the first write of a name is accepted whatever its token", firstAccepted},
	{"tokens beyond 2^53 compare exactly", largeTokens},
	{"names with awkward characters are kept apart", awkwardNames},
	{"long names sharing a 1000-byte prefix are kept apart", longNames},
	{"concurrent writers with interleaved tokens", concurrentWriters},
	{"a new connection sees the maximum", newConnection},
	{"bad input is refused with ErrInvalid and changes nothing", badInput},
	{"a cancelled context is not reported as stale", cancelledContext},
}

type suite struct {
	h   Harness
	seq atomic.Uint64
}

// bounded runs fn with a context that ends after h.Timeout, and fails t if
// fn has not returned a little after that. A failing case's own lines
// report what failed; bounded adds, at the end, which function the case
// is, where, and the Harness's shape.
func (s *suite) bounded(t *testing.T, fn func(ctx context.Context, t *testing.T, s *suite)) {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the failing case is %s; Harness: Writers %d, Writes %d, Timeout %s, Prefix %q", caseAt(fn), s.h.Writers, s.h.Writes, s.h.Timeout, s.h.Prefix)
		}
	})
	fn(ctx, t, s)
	if ctx.Err() != nil {
		t.Fatalf("the case %s took longer than Harness.Timeout (%s)", caseAt(fn), s.h.Timeout)
	}
}

// target returns a new Target on the store.
func (s *suite) target(t *testing.T) Target {
	t.Helper()
	tg := s.h.New(t)
	if tg == nil {
		t.Fatal("Harness.New returned nil")
	}
	return tg
}

// name returns a lease name no other subtest or run uses.
func (s *suite) name(label string) string {
	return fmt.Sprintf("%s%d/%s", s.h.Prefix, s.seq.Add(1), label)
}

// key returns a data key no other subtest or run uses.
func (s *suite) key(label string) string {
	return fmt.Sprintf("%sdata/%d/%s", s.h.Prefix, s.seq.Add(1), label)
}

// write makes a guarded write that must be accepted.
func write(ctx context.Context, t *testing.T, tg Target, name string, token uint64, key, value string) {
	t.Helper()
	if err := tg.Write(ctx, name, token, key, value); err != nil {
		t.Fatalf("Write(%s, token %d, %q) should be accepted: %v", short(name), token, key, err)
	}
}

// mustBeStale checks that err is a refusal of (name, token) in favour of
// max.
func mustBeStale(t *testing.T, op string, err error, name string, token, max uint64) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s with token %d was accepted, but token %d had been accepted for %s before", op, token, max, short(name))
	}
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("%s with token %d (max %d) failed with %v; want an error matching fence.ErrStale", op, token, max, err)
	}
	var se *fence.StaleError
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v matches ErrStale but is not a *fence.StaleError", op, err)
	}
	if se.Name != name || se.Token != token || se.Max != max {
		t.Fatalf("%s refused with StaleError{Name: %s, Token: %d, Max: %d}; want {Name: %s, Token: %d, Max: %d}",
			op, short(se.Name), se.Token, se.Max, short(name), token, max)
	}
}

// mustRead checks the value of a data item.
func mustRead(ctx context.Context, t *testing.T, tg Target, key, want string, wantOK bool, why string) {
	t.Helper()
	got, ok, err := tg.Read(ctx, key)
	if err != nil {
		t.Fatalf("Read(%q): %v", key, err)
	}
	switch {
	case ok != wantOK && wantOK:
		t.Fatalf("%s: data item %q is missing; want %q", why, key, want)
	case ok != wantOK:
		t.Fatalf("%s: data item %q holds %q; want it never written", why, key, got)
	case got != want:
		t.Fatalf("%s: data item %q holds %q; want %q", why, key, got, want)
	}
}

// short abbreviates a long name for messages.
func short(name string) string {
	if len(name) <= 80 {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q...(%d bytes)...%q", name[:40], len(name), name[len(name)-16:])
}

// checkErrKind fails t unless err matches want (with errors.Is).
func checkErrKind(t *testing.T, op string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v; want an error matching %v", op, err, want)
	}
	if errors.Is(err, fence.ErrStale) && want != fence.ErrStale {
		t.Fatalf("%s: got %v, which matches fence.ErrStale; want only %v", op, err, want)
	}
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
