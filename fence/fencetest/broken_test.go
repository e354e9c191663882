package fencetest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/fencetest"
)

// brokenEnv selects the broken checker that TestBrokenChecker runs the
// suite against, in a child process of TestSuiteCatchesBrokenCheckers.
const brokenEnv = "FENCETEST_BROKEN_MODE"

// Each broken checker breaks one promise; the suite must fail it, and the
// named subtest must be among the failures.
var brokenModes = map[string]string{
	"accepts-stale":      "a_stale_token_is_refused_with_the_winning_token",
	"refuses-equal":      "an_equal_token_is_accepted",
	"keeps-first-max":    "a_higher_token_is_accepted_and_remembered",
	"lowers-on-refusal":  "a_refused_write_changes_nothing",
	"writes-on-refusal":  "a_refused_write_changes_nothing",
	"check-only-checks":  "Check_raises_the_maximum_that_writes_are_held_to",
	"wrong-winner":       "a_stale_token_is_refused_with_the_winning_token",
	"float-tokens":       "tokens_beyond_2^53_compare_exactly",
	"string-tokens":      "tokens_beyond_2^53_compare_exactly",
	"case-insensitive":   "names_with_awkward_characters_are_kept_apart",
	"truncated-names":    "long_names_sharing_a_1000-byte_prefix_are_kept_apart",
	"check-then-write":   "concurrent_writers_with_interleaved_tokens",
	"per-connection":     "a_new_connection_sees_the_maximum",
	"no-validation":      "bad_input_is_refused_with_ErrInvalid_and_changes_nothing",
	"cancelled-as-stale": "a_cancelled_context_is_not_reported_as_stale",
	"forgets-on-restart": "the_maximum_survives_a_restart_of_the_store",
}

func TestSuiteCatchesBrokenCheckers(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("running as a child")
	}
	if testing.Short() {
		t.Skip("starts a process per broken checker")
	}
	for mode, want := range brokenModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenChecker$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a checker broken by %q:\n%s", mode, tail(out))
			}
			// check-then-write also writes the toy's map outside its lock:
			// under -race the detector may report that in whichever
			// parallel subtest touched the map first, and without it the
			// runtime may stop the child with "concurrent map writes" (or
			// "read and map write");
			// either catches the checker too.
			caught := strings.Contains(string(out), "--- FAIL: TestBrokenChecker/"+want) ||
				(mode == "check-then-write" && (strings.Contains(string(out), "WARNING: DATA RACE") || strings.Contains(string(out), "fatal error: concurrent map")))
			if !caught {
				t.Fatalf("the suite failed the %q checker, but not in subtest %q:\n%s", mode, want, failures(out))
			}
		})
	}
}

// TestSuitePassesToy runs the suite against the toy checker with nothing
// broken: the control for the broken modes.
func TestSuitePassesToy(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("running as a child")
	}
	store := &toyStore{max: map[string]uint64{}, data: map[string]string{}}
	fencetest.Run(t, fencetest.Harness{
		New:     func(testing.TB) fencetest.Target { return store },
		Restart: func(testing.TB) {},
	})
}

func TestBrokenChecker(t *testing.T) {
	mode := os.Getenv(brokenEnv)
	if mode == "" {
		t.Skip("only run as a child of TestSuiteCatchesBrokenCheckers")
	}
	if _, ok := brokenModes[mode]; !ok {
		t.Fatalf("unknown mode %q", mode)
	}
	store := &toyStore{mode: mode, max: map[string]uint64{}, data: map[string]string{}}
	fencetest.Run(t, fencetest.Harness{
		New: func(testing.TB) fencetest.Target {
			if mode == "per-connection" {
				return &toyStore{mode: mode, max: map[string]uint64{}, data: store.data, dataMu: &store.mu}
			}
			return store
		},
		Restart: func(testing.TB) {
			if mode == "forgets-on-restart" {
				store.mu.Lock()
				store.max = map[string]uint64{}
				store.mu.Unlock()
			}
		},
		Timeout: 20 * time.Second,
	})
}

// toyStore is a checker and its data in memory, correct unless mode says
// how to break it.
type toyStore struct {
	mode   string
	mu     sync.Mutex
	max    map[string]uint64
	data   map[string]string
	dataMu *sync.Mutex // per-connection mode: the shared data's lock
}

func (s *toyStore) key(name string) string {
	switch s.mode {
	case "case-insensitive":
		return strings.ToLower(name)
	case "truncated-names":
		if len(name) > 1000 {
			return name[:1000]
		}
	}
	return name
}

// accepts is the rule, as each mode gets it wrong.
func (s *toyStore) accepts(token, cur uint64) bool {
	switch s.mode {
	case "accepts-stale":
		return true
	case "refuses-equal":
		return cur == 0 || token > cur
	case "float-tokens":
		return float64(token) >= float64(cur)
	case "string-tokens":
		return cur == 0 || fmt.Sprint(token) >= fmt.Sprint(cur)
	}
	return token >= cur
}

func (s *toyStore) guard(ctx context.Context, name string, token uint64, write func(), raise bool) error {
	if s.mode != "no-validation" {
		if err := fence.Validate(name, token); err != nil {
			return err
		}
	}
	if s.mode != "cancelled-as-stale" {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	k := s.key(name)
	cur := s.max[k]
	if s.mode == "cancelled-as-stale" && ctx.Err() != nil {
		s.mu.Unlock()
		return &fence.StaleError{Name: name, Token: token, Max: cur + 1}
	}
	if !s.accepts(token, cur) {
		if s.mode == "lowers-on-refusal" {
			s.max[k] = token
		}
		if s.mode == "writes-on-refusal" && write != nil {
			s.write(write)
		}
		s.mu.Unlock()
		winner := cur
		if s.mode == "wrong-winner" {
			winner = cur + 1
		}
		return &fence.StaleError{Name: name, Token: token, Max: winner}
	}
	if s.mode == "check-then-write" {
		// The check and the write are two steps, with a gap between.
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		if write != nil {
			s.write(write)
		}
		s.mu.Lock()
		if raise {
			s.max[k] = max(s.max[k], token)
		}
		s.mu.Unlock()
		return nil
	}
	if write != nil {
		s.write(write)
	}
	if raise && !(s.mode == "keeps-first-max" && cur != 0) {
		s.max[k] = token
	}
	s.mu.Unlock()
	return nil
}

func (s *toyStore) write(fn func()) {
	if s.dataMu != nil {
		s.dataMu.Lock()
		defer s.dataMu.Unlock()
	}
	fn()
}

func (s *toyStore) Check(ctx context.Context, name string, token uint64) error {
	return s.guard(ctx, name, token, nil, s.mode != "check-only-checks")
}

func (s *toyStore) Write(ctx context.Context, name string, token uint64, key, value string) error {
	return s.guard(ctx, name, token, func() { s.data[key] = value }, true)
}

func (s *toyStore) Read(ctx context.Context, key string) (string, bool, error) {
	mu := &s.mu
	if s.dataMu != nil {
		mu = s.dataMu
	}
	mu.Lock()
	defer mu.Unlock()
	v, ok := s.data[key]
	return v, ok, nil
}

// tail returns the last lines of a child's output.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// failures returns the failure lines of a child's output.
func failures(out []byte) string {
	var fails []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "--- FAIL") || strings.Contains(l, ".go:") {
			fails = append(fails, l)
		}
	}
	if len(fails) > 60 {
		fails = fails[:60]
	}
	return strings.Join(fails, "\n")
}
