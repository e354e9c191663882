package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/syncbuf"
	"github.com/leasekit/lease/internal/testenv"
)

// The binaries under test, built once by TestMain.
var (
	leaseBin  string // cmd/lease as users get it
	brokenBin string // with the leasebroken tag: also knows broken://
)

// raceEnabled is set by race_test.go when the tests run with -race, so the
// binaries are built with it too.
var raceEnabled bool

// testHelpers are the other roles of the test binary: when the variable
// is set, TestMain runs the function instead of the tests.
var testHelpers = map[string]func() int{}

func TestMain(m *testing.M) {
	// The tests that run the command line in this process start this
	// binary as lease run's watcher.
	if code, ok := internalRole(); ok {
		os.Exit(code)
	}
	for env, f := range testHelpers {
		if os.Getenv(env) != "" {
			os.Exit(f())
		}
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lease-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	leaseBin = filepath.Join(dir, "lease")
	brokenBin = filepath.Join(dir, "lease-broken")
	errs := make(chan error, 2)
	go func() { errs <- build(leaseBin) }()
	go func() { errs <- build(brokenBin, "-tags", "leasebroken") }()
	for range 2 {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	testenv.DefaultParallel(minParallel)
	return m.Run()
}

// minParallel is the least -parallel the tests run with by default.
const minParallel = 6

// build compiles this package into out.
func build(out string, flags ...string) error {
	args := append([]string{"build", "-o", out}, flags...)
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, b)
	}
	// Once, on a loaded machine with other builds sharing the cache, the
	// binary came out without execute permission and every test that ran
	// it failed with "permission denied": say so, and make it executable.
	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	if runtime.GOOS != "windows" && fi.Mode()&0o111 == 0 {
		fmt.Fprintf(os.Stderr, "lease tests: go build wrote %s with mode %v; making it executable\n", out, fi.Mode())
		return os.Chmod(out, 0o755)
	}
	return nil
}

// result is how a lease process ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// proc is a lease process the test started.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer
	done           chan struct{}
	res            result
}

// start starts bin with args and the environment env (on top of a clean
// one: no LEASE_* from the test's own environment). The test fails if it
// is still running when the test ends.
func start(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	// A grandchild left holding the output pipes must not hang the test.
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		defer close(p.done)
		_ = p.cmd.Wait()
		p.res = result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("lease %s was still running at the end of the test; killed it\n%s", strings.Join(args, " "), p.res)
		}
	})
	return p
}

// wait waits for p to exit, failing t after a generous timeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("lease %s did not exit within 2 minutes; killed it\n%s", strings.Join(p.cmd.Args[1:], " "), p.res)
		return result{}
	}
}

// runLease runs the lease binary to its end.
func runLease(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return start(t, leaseBin, env, args...).wait(t)
}

// cleanEnv is the test's environment without LEASE_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASE_") {
			env = append(env, kv)
		}
	}
	return env
}

// sqliteURL is a fresh SQLite store in the test's temporary directory.
func sqliteURL(t *testing.T) string {
	u := url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "lease.db"))}
	return u.String()
}

// stores are the stores the cross-process tests run against: SQLite
// always, the servers when their LEASE_TEST_* variable is set.
var stores = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"sqlite", sqliteURL},
	{"postgres", func(t *testing.T) string { return testenv.Lookup(t, "LEASE_TEST_POSTGRES") }},
	{"mysql", func(t *testing.T) string { return testenv.Lookup(t, "LEASE_TEST_MYSQL") }},
	{"redis", func(t *testing.T) string { return testenv.Lookup(t, "LEASE_TEST_REDIS") }},
	{"etcd", func(t *testing.T) string {
		v := testenv.Lookup(t, "LEASE_TEST_ETCD")
		if !strings.Contains(v, "://") {
			v = "etcd://" + v // the variable may hold bare endpoints
		}
		return v
	}},
}

// forEachStore runs test once per store, as parallel subtests: each
// store's run has its own store (SQLite) or its own lease names
// (uniqueName), and spends most of its time waiting on ttls and child
// processes, so the stores need not wait for one another.
func forEachStore(t *testing.T, test func(t *testing.T, backend string)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			test(t, s.url(t))
		})
	}
}

// uniqueName is a lease name no other test or run uses, so that tests
// against a shared server never meet.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("lease-cli-test/%s/%08x", t.Name(), rand.Uint32())
}

// waitFor polls until cond holds, failing t after a generous timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readFile returns path's contents without surrounding space.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
