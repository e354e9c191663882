package fencetest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
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
	"accepts-stale":     "a_stale_token_is_refused_with_the_winning_token",
	"refuses-equal":     "an_equal_token_is_accepted",
	"keeps-first-max":   "a_higher_token_is_accepted_and_remembered",
	"lowers-on-refusal": "a_refused_write_changes_nothing",
	"writes-on-refusal": "a_refused_write_changes_nothing",
	"check-only-checks": "Check_raises_the_maximum_that_writes_are_held_to",
	"wrong-winner":      "a_stale_token_is_refused_with_the_winning_token",
	"float-tokens":      "tokens_beyond_2^53_compare_exactly",
	"string-tokens":     "tokens_beyond_2^53_compare_exactly",
	"case-insensitive":  "names_with_awkward_characters_are_kept_apart",
	"truncated-names":   "long_names_sharing_a_1000-byte_prefix_are_kept_apart",
	"check-then-write":  "concurrent_writers_with_interleaved_tokens",
	// As check-then-write, with a gap of no more than a yield to the
	// scheduler: a checker whose two steps are both in memory.
	"check-yield-write": "concurrent_writers_with_interleaved_tokens",
	// The check and the write are one step, the raise of the maximum
	// (to the token, not the larger of the two) another.
	"raise-after-write": "concurrent_writers_with_interleaved_tokens",
	"per-connection":    "a_new_connection_sees_the_maximum",
	// Check's raises stay with the connection that made them.
	"check-per-connection": "a_new_connection_sees_the_maximum",
	// The store keeps maxima as float64 (a JSON number); each connection
	// remembers what it set exactly, so only another one sees the rounding.
	"float-in-store":     "a_new_connection_sees_the_maximum",
	"no-validation":      "bad_input_is_refused_with_ErrInvalid_and_changes_nothing",
	"cancelled-as-stale": "a_cancelled_context_is_not_reported_as_stale",
	"forgets-on-restart": "the_maximum_survives_a_restart_of_the_store",
	// Check's raises live in the store's memory only; guarded writes'
	// are durable.
	"check-not-durable": "the_maximum_survives_a_restart_of_the_store",
	// The maxima are saved as float64 (JSON numbers) across a restart.
	"float-on-restart": "the_maximum_survives_a_restart_of_the_store",
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
			caught := strings.Contains(string(out), "--- FAIL: TestBrokenChecker/"+want)
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
	store := newToyStore("")
	fencetest.Run(t, fencetest.Harness{
		New:     func(testing.TB) fencetest.Target { return store.connect() },
		Restart: func(testing.TB) { store.restart() },
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
	store := newToyStore(mode)
	fencetest.Run(t, fencetest.Harness{
		New:     func(testing.TB) fencetest.Target { return store.connect() },
		Restart: func(testing.TB) { store.restart() },
		Timeout: 20 * time.Second,
	})
}

// toyStore is a checker and its data in memory, correct unless mode says
// how to break it. Its Targets are toyConns, each a connection to it.
type toyStore struct {
	mode     string
	mu       sync.Mutex
	max      map[string]uint64  // the maxima, as the store keeps them
	volatile map[string]uint64  // check-not-durable: Check's maxima, in memory
	floats   map[string]float64 // float-in-store: the maxima, as float64
	data     map[string]string
}

func newToyStore(mode string) *toyStore {
	return &toyStore{mode: mode, max: map[string]uint64{}, volatile: map[string]uint64{}, floats: map[string]float64{}, data: map[string]string{}}
}

// toyConn is one connection to a toyStore.
type toyConn struct {
	s *toyStore
	// own are the maxima this connection keeps itself (per-connection,
	// check-per-connection and float-in-store), under s.mu.
	own map[string]uint64
}

func (s *toyStore) connect() *toyConn { return &toyConn{s: s, own: map[string]uint64{}} }

// restart loses what the store does not keep durably, as each mode
// breaks it.
func (s *toyStore) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.mode {
	case "forgets-on-restart":
		s.max = map[string]uint64{}
	case "check-not-durable":
		s.volatile = map[string]uint64{}
	case "float-on-restart":
		for k, v := range s.max {
			s.max[k] = uint64(float64(v))
		}
	}
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

// current returns the maximum of k as c sees it. s.mu must be held.
func (c *toyConn) current(k string) uint64 {
	s := c.s
	switch s.mode {
	case "per-connection":
		return c.own[k]
	case "check-per-connection":
		return max(s.max[k], c.own[k])
	case "check-not-durable":
		return max(s.max[k], s.volatile[k])
	case "float-in-store":
		if v, ok := c.own[k]; ok {
			return v
		}
		return uint64(s.floats[k])
	}
	return s.max[k]
}

// raise records token as k's maximum, for a guarded write or (checked) a
// Check alone. s.mu must be held.
func (c *toyConn) raise(k string, token uint64, checked bool) {
	s := c.s
	switch {
	case s.mode == "per-connection", s.mode == "check-per-connection" && checked:
		c.own[k] = token
	case s.mode == "check-not-durable" && checked:
		s.volatile[k] = token
	case s.mode == "float-in-store":
		c.own[k], s.floats[k] = token, float64(token)
	case s.mode == "keeps-first-max" && s.max[k] != 0:
	case s.mode == "check-then-write", s.mode == "check-yield-write":
		s.max[k] = max(s.max[k], token)
	default:
		s.max[k] = token
	}
}

func (c *toyConn) guard(ctx context.Context, name string, token uint64, write func(), raise bool) error {
	s := c.s
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
	cur := c.current(k)
	if s.mode == "cancelled-as-stale" && ctx.Err() != nil {
		s.mu.Unlock()
		return &fence.StaleError{Name: name, Token: token, Max: cur + 1}
	}
	if !s.accepts(token, cur) {
		if s.mode == "lowers-on-refusal" {
			s.max[k] = token
		}
		if s.mode == "writes-on-refusal" && write != nil {
			write()
		}
		s.mu.Unlock()
		winner := cur
		if s.mode == "wrong-winner" {
			winner = cur + 1
		}
		return &fence.StaleError{Name: name, Token: token, Max: winner}
	}
	switch s.mode {
	case "check-then-write":
		// The check and the write are two steps, each atomic, with a
		// gap between them (a round trip, say) in which nothing is held.
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	case "check-yield-write":
		s.mu.Unlock()
		runtime.Gosched()
		s.mu.Lock()
	}
	if write != nil {
		write()
	}
	if raise && s.mode == "raise-after-write" {
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	}
	if raise {
		c.raise(k, token, write == nil)
	}
	s.mu.Unlock()
	return nil
}

func (c *toyConn) Check(ctx context.Context, name string, token uint64) error {
	return c.guard(ctx, name, token, nil, c.s.mode != "check-only-checks")
}

func (c *toyConn) Write(ctx context.Context, name string, token uint64, key, value string) error {
	return c.guard(ctx, name, token, func() { c.s.data[key] = value }, true)
}

func (c *toyConn) Read(ctx context.Context, key string) (string, bool, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	v, ok := c.s.data[key]
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
