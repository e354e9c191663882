package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bounds on waiting for servers. A loaded 2-CPU CI machine is slow, so
// these are generous; a server that needs longer is broken.
const (
	// ReadyTimeout bounds how long Start waits for a server to answer.
	ReadyTimeout = 30 * time.Second
	// StopTimeout bounds how long Stop waits for a graceful exit before
	// it kills the server.
	StopTimeout = 15 * time.Second
	// pollInterval is how often readiness is checked.
	pollInterval = 25 * time.Millisecond
	// logTail is how much of a server's log a failing test prints.
	logTail = 16 << 10
)

// Process is one server process that a test owns: started on its own
// port with its own data directory, and stopped when the test ends. Its
// methods fail the test (t.Fatal) when they cannot do what they say, so
// call them from the goroutine of the test that started the server.
//
// The process runs in its own process group, and on Linux it gets SIGKILL
// if the test binary dies (Pdeathsig), so no server outlives the tests.
type Process struct {
	t    testing.TB
	name string
	addr string
	url  string
	dir  string

	argv       []string // program and arguments
	env        []string // nil: the test's environment
	ready      func(ctx context.Context) error
	stopSignal sig // graceful stop: sigTerm, or sigInt for PostgreSQL
	endSignal  sig // at cleanup, before sigKill: 0 for none
	log        *os.File

	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{} // closed when the current run has been reaped
	waitErr    error         // the current run's exit status, once exited
	paused     bool
	leaderGone bool // the process exited: never signal its group again
}

// Name returns the server's name in logs and messages, such as "redis" or
// "etcd-1".
func (p *Process) Name() string { return p.name }

// Addr returns the address clients dial, "127.0.0.1:port". It stays the
// same across Stop, Start, Restart and Kill.
func (p *Process) Addr() string { return p.addr }

// URL returns a URL for the server in the form this module's backends and
// LEASE_TEST_* variables take (redis://, postgres://, mysql://, etcd://),
// with credentials if any.
func (p *Process) URL() string { return p.url }

// Dir returns the server's data directory.
func (p *Process) Dir() string { return p.dir }

// Pid returns the server's process id, or 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the server process is alive (it may still be
// starting, or paused).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

func (p *Process) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Start starts the server if it is not running and waits (up to
// ReadyTimeout) until it answers. It fails the test, printing the end of
// the server's log, if the server exits or does not answer in time.
func (p *Process) Start() {
	p.t.Helper()
	if err := p.start(); err != nil {
		p.t.Fatalf("testserver: %v", err)
	}
}

// Stop stops the server gracefully (SIGTERM; for PostgreSQL SIGINT, a
// fast shutdown) and waits for it to exit, killing it after StopTimeout.
// Stopping a stopped server does nothing.
func (p *Process) Stop() {
	p.t.Helper()
	p.halt(p.stopSignal, StopTimeout)
}

// Kill kills the server and everything it started (SIGKILL to its process
// group and, on Linux, to every process below it, since PostgreSQL gives
// each backend a session of its own), as a crash or a power cut of its
// machine would, and waits for them all to exit, so that no connection is
// answered after Kill returns. Killing a stopped server does nothing.
func (p *Process) Kill() {
	p.t.Helper()
	var below []int
	p.mu.Lock()
	if p.runningLocked() && !p.leaderGone {
		// Stopped, the server cannot start another child while its
		// children are listed.
		_ = p.signalLocked(sigStop, true)
		below = descendants(p.cmd.Process.Pid)
	}
	p.mu.Unlock()
	p.halt(sigKill, 0)
	for _, id := range below {
		_ = sendSignal(id, false, sigKill)
	}
	deadline := time.Now().Add(StopTimeout)
	for _, id := range below {
		for !gone(id) {
			if time.Now().After(deadline) {
				p.t.Fatalf("testserver: kill %s: process %d still running after %s", p.name, id, StopTimeout)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Restart stops the server gracefully and starts it again on the same
// port with the same data directory.
func (p *Process) Restart() {
	p.t.Helper()
	p.Stop()
	p.Start()
}

// Pause freezes the server (SIGSTOP to its process group): it keeps its
// connections and its port but answers nothing, like a machine cut off by
// a network partition or stalled by a long GC pause. Resume ends it; the
// test's cleanup kills a paused server as well.
func (p *Process) Pause() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		p.t.Fatalf("testserver: pause %s: not running", p.name)
	}
	if err := p.signalLocked(sigStop, true); err != nil {
		p.t.Fatalf("testserver: pause %s: %v", p.name, err)
	}
	p.paused = true
}

// Resume lets a paused server run again (SIGCONT).
func (p *Process) Resume() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() || !p.paused {
		return
	}
	if err := p.signalLocked(sigCont, true); err != nil {
		p.t.Fatalf("testserver: resume %s: %v", p.name, err)
	}
	p.paused = false
}

// start runs the server and waits until it is ready.
func (p *Process) start() error {
	if err := p.begin(); err != nil {
		return err
	}
	return p.awaitReady()
}

// begin runs the server, if it is not running, without waiting for it.
func (p *Process) begin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return nil
	}
	fmt.Fprintf(p.log, "\n==== testserver: starting %s: %s\n", p.name, strings.Join(p.argv, " "))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	cmd.SysProcAttr = sysProcAttr()
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.waitErr, p.paused, p.leaderGone = cmd, exited, nil, false, false
	go p.reap(cmd, exited)
	return nil
}

// awaitReady waits (up to ReadyTimeout) until the server answers; it kills
// a server that does not.
func (p *Process) awaitReady() error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		err := p.ready(attempt)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			p.mu.Lock()
			werr := p.waitErr
			p.mu.Unlock()
			return fmt.Errorf("%s exited while starting (%v)%s", p.name, werr, p.logSuffix())
		case <-ctx.Done():
			p.halt(sigKill, 0)
			return fmt.Errorf("%s did not answer within %s: %v%s", p.name, ReadyTimeout, err, p.logSuffix())
		case <-time.After(pollInterval):
		}
	}
}

// reap waits for the run cmd to exit. Where the system allows (Linux), it
// first waits without reaping, so that the exited leader still holds its
// process group id while the group's stragglers (a fork saving an RDB, a
// PostgreSQL backend) are killed: a group id is never signalled after it
// could have been reused by an unrelated process.
func (p *Process) reap(cmd *exec.Cmd, exited chan struct{}) {
	if waitNoReap(cmd.Process.Pid) {
		p.mu.Lock()
		_ = p.signalLocked(sigKill, true)
		p.leaderGone = true
		p.mu.Unlock()
	}
	err := cmd.Wait()
	released()
	p.mu.Lock()
	p.leaderGone = true
	p.waitErr = err
	p.mu.Unlock()
	close(exited)
}

// signalLocked sends s to the server, or to its whole process group. p.mu
// must be held.
func (p *Process) signalLocked(s sig, group bool) error {
	if p.cmd == nil || p.leaderGone {
		return nil
	}
	return sendSignal(p.cmd.Process.Pid, group, s)
}

// halt sends s to the server (to its whole group for sigKill) and waits
// for it to exit; after timeout (when > 0) it kills the group.
func (p *Process) halt(s sig, timeout time.Duration) {
	p.mu.Lock()
	if !p.runningLocked() {
		p.mu.Unlock()
		return
	}
	exited := p.exited
	fmt.Fprintf(p.log, "\n==== testserver: sending %v to %s\n", s, p.name)
	_ = p.signalLocked(s, s == sigKill)
	if p.paused && s != sigKill {
		_ = p.signalLocked(sigCont, true) // a stopped process cannot act on s
	}
	p.paused = false
	p.mu.Unlock()
	if timeout > 0 {
		select {
		case <-exited:
		case <-time.After(timeout):
			fmt.Fprintf(p.log, "\n==== testserver: %s still running after %s: killing it\n", p.name, timeout)
			p.mu.Lock()
			_ = p.signalLocked(sigKill, true)
			p.mu.Unlock()
		}
	}
	<-exited
}

// cleanup stops the server for good when the test ends and prints its log
// if the test failed.
func (p *Process) cleanup() {
	if p.endSignal != 0 {
		p.halt(p.endSignal, StopTimeout)
	}
	p.halt(sigKill, 0)
	if p.t.Failed() {
		p.t.Logf("testserver: log of %s (%s):%s", p.name, p.addr, p.logSuffix())
	}
	_ = p.log.Close()
}

// logSuffix returns the end of the server's log, for messages.
func (p *Process) logSuffix() string {
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		return fmt.Sprintf("\n(no log: %v)", err)
	}
	if len(b) > logTail {
		b = append([]byte("...\n"), b[len(b)-logTail:]...)
	}
	if len(b) == 0 {
		return "\n(empty log)"
	}
	return "\n" + string(b)
}

// newProcess prepares a server process; the caller fills in what it needs
// and calls launch. A test that starts two servers of one kind gets
// "redis" and "redis-2", each with its own log.
func newProcess(t testing.TB, name, addr, dir string, argv ...string) (*Process, error) {
	logDir := filepath.Join(testTempDir(t), "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	var f *os.File
	base := name
	for i := 2; ; i++ {
		var err error
		f, err = os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return nil, fmt.Errorf("log file for %s: %w", name, err)
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return &Process{
		t:          t,
		name:       name,
		addr:       addr,
		dir:        dir,
		argv:       argv,
		stopSignal: sigTerm,
		log:        f,
	}, nil
}

// launch registers the cleanup and starts the server, failing t if it
// does not come up.
func (p *Process) launch() {
	p.t.Helper()
	p.t.Cleanup(p.cleanup)
	p.Start()
}

// testTempDirs remembers one temporary directory per test, shared by every
// server the test starts.
var testTempDirs sync.Map // testing.TB → string

func testTempDir(t testing.TB) string {
	if d, ok := testTempDirs.Load(t); ok {
		return d.(string)
	}
	d := t.TempDir()
	actual, loaded := testTempDirs.LoadOrStore(t, d)
	if !loaded {
		t.Cleanup(func() { testTempDirs.Delete(t) })
	}
	return actual.(string)
}

// mkdir creates a fresh directory for a server's data under the test's
// temporary directory: name, or name-2, name-3... if taken.
func mkdir(t testing.TB, name string) (string, error) {
	base := name
	for i := 2; ; i++ {
		d := filepath.Join(testTempDir(t), name)
		err := os.Mkdir(d, 0o700)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return "", err
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}
