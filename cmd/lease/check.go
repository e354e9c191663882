package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/leasekit/lease/driver"
)

// checkConfig is what "lease check" hands to the copy of itself that runs
// the conformance suite, through the checkChildEnv variable.
type checkConfig struct {
	URL         string
	TTL         time.Duration
	Granularity time.Duration
	ExpiryLag   time.Duration
	Tenures     int
	Prefix      string
}

// checkChildEnv, when set, makes the binary run the conformance suite (as
// a test binary would) instead of the command line: conformance.Run needs
// a *testing.T, and the testing package's runner exits the process when it
// is done, so "lease check" runs it in a child process and reports on its
// output.
const checkChildEnv = "LEASE_INTERNAL_CHECK"

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

// check is "lease check [flags] [URL]".
func (g *globals) check(ctx context.Context, args []string) error {
	fs := g.flags("check", "check [flags] [URL]\n\nRuns the conformance suite, every promise of the lease contract, against the store\nat URL (default: the --backend store) and reports which promises it keeps.\nIt writes leases under a random prefix; use a store or table you can spare.\nExits 0 when the store passes, 1 when it fails.")
	ttl := fs.Duration("ttl", 0, "shortest lease the suite may use (default 1s, 2s for etcd); the suite takes a few multiples of it")
	gran := fs.Duration("granularity", -1, "how far the store may round a ttl up (default by scheme: 1s etcd, else 1ms)")
	lag := fs.Duration("expiry-lag", -1, "how late the store may notice an expiry (default by scheme: 1s etcd, else 0)")
	tenures := fs.Int("tenures", 0, "tenures the token-order test starts on one name (default 2000)")
	prefix := fs.String("prefix", "", "prefix of every lease name the suite uses (default a random one)")
	parallel := fs.Int("parallel", 0, "subtests run at once (default 8; 1 for sqlite, whose one writer at a time would starve a renewal)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	verbose := fs.Bool("v", false, "print every log line of the suite, not only those of failing subtests")
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
		return usageErrorf("check: %q is not a backend URL (want e.g. sqlite:///path/lease.db or redis://host:6379)", raw)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "mem" {
		return usageErrorf("check: every mem:// URL opens a new, empty store, so the suite cannot share one; the memory backend is checked by its own tests")
	}
	cfg := checkConfig{URL: raw, Tenures: *tenures, Prefix: *prefix}
	cfg.TTL, cfg.Granularity, cfg.ExpiryLag = storeTimings(scheme)
	if *ttl > 0 {
		cfg.TTL = *ttl
	}
	if *gran >= 0 {
		cfg.Granularity = *gran
	}
	if *lag >= 0 {
		cfg.ExpiryLag = *lag
	}
	switch {
	case *parallel < 0:
		return usageErrorf("check: --parallel must not be negative")
	case *parallel == 0 && scheme == "sqlite":
		// SQLite lets one writer in at a time and its busy handler is not
		// fair: with eight subtests writing at once, a renewal can wait
		// past its lease's deadline on a loaded machine. One at a time,
		// the suite checks the contract rather than the lock's fairness.
		*parallel = 1
	case *parallel == 0:
		*parallel = 8
	}
	// Open once here, so a bad URL or an unreachable store is one line
	// rather than a failure in every subtest.
	g.backend = raw
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	return g.runCheckChild(ctx, cfg, *parallel, *timeout, *verbose)
}

// The lines of "go test -v" output that the report reads.
var (
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+s)\)\s*$`)
	stepLine   = regexp.MustCompile(`^=== (?:RUN|PAUSE|CONT|NAME)\s+(\S+)\s*$`)
	summary    = regexp.MustCompile(`^(PASS|FAIL|ok\s.*|FAIL\s.*)$`)
)

// checkTest is the name of the one test the child runs; the suite's
// promises are its subtests.
const checkTest = "TestConformance"

// runCheckChild runs the suite in a copy of this binary and prints one
// line per promise, with the log lines of those that failed.
func (g *globals) runCheckChild(ctx context.Context, cfg checkConfig, parallel int, timeout time.Duration, verbose bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("check: finding this program to run the suite: %w", err)
	}
	conf, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self,
		"-test.v=true",
		"-test.count=1",
		fmt.Sprintf("-test.parallel=%d", parallel),
		"-test.timeout="+timeout.String(),
	)
	cmd.Env = append(os.Environ(), checkChildEnv+"="+string(conf))
	cmd.Stderr = g.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "checking %s against the lease contract (ttl %s)\n", driver.Redact(cfg.URL), cfg.TTL)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("check: running the suite: %w", err)
	}

	var passed, failed, skipped int
	logs := map[string][]string{} // log lines by test, until its result
	current := ""
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if m := stepLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil {
			name := m[2]
			if name == checkTest {
				current = ""
				if m[1] == "FAIL" {
					// A failure outside any subtest: show its lines.
					printLogs(g, logs[name])
				}
				continue
			}
			var mark string
			switch m[1] {
			case "PASS":
				passed++
				mark = "ok  "
			case "FAIL":
				failed++
				mark = "FAIL"
			case "SKIP":
				skipped++
				mark = "skip"
			}
			fmt.Fprintf(g.stdout, "%s  %s (%s)\n", mark, promise(name), m[3])
			if m[1] != "PASS" || verbose {
				printLogs(g, logs[name])
			}
			delete(logs, name)
			continue
		}
		if summary.MatchString(line) {
			continue
		}
		if current == "" {
			fmt.Fprintln(g.stdout, line) // e.g. a panic or a timeout
			continue
		}
		logs[current] = append(logs[current], line)
	}
	if err := sc.Err(); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("check: reading the suite's output: %w", err)
	}
	// Lines of tests that never reported a result (a timeout, a crash).
	for name, lines := range logs {
		fmt.Fprintf(g.stdout, "?     %s (no result)\n", promise(name))
		printLogs(g, lines)
	}
	werr := cmd.Wait()
	elapsed := time.Since(start).Round(time.Millisecond)
	total := passed + failed + skipped
	switch {
	case werr == nil && failed == 0 && passed > 0:
		fmt.Fprintf(g.stdout, "PASS: the store kept all %d promises checked (%d skipped) in %s\n", passed, skipped, elapsed)
		return nil
	case failed > 0:
		fmt.Fprintf(g.stdout, "FAIL: the store broke %d of %d promises checked (%s)\n", failed, total, elapsed)
	default:
		fmt.Fprintf(g.stdout, "FAIL: the suite did not finish (%v) after %s\n", werr, elapsed)
	}
	return &exitError{code: exitFailure, msg: fmt.Sprintf("%s does not keep the lease contract: do not rely on it", driver.Redact(cfg.URL))}
}

// printLogs prints a subtest's log lines under its result, cutting very
// long ones (a 1024-byte lease name) short.
func printLogs(g *globals, lines []string) {
	const maxLen = 400
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if r := []rune(l); len(r) > maxLen {
			l = string(r[:maxLen]) + "..."
		}
		fmt.Fprintln(g.stdout, "      "+l)
	}
}

// promise turns a subtest name back into the sentence it was given as.
func promise(name string) string {
	name = strings.TrimPrefix(name, checkTest+"/")
	return strings.ReplaceAll(name, "_", " ")
}
