//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal and returns its controlling side
// and the path of its terminal side.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		t.Fatalf("unlocking the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		t.Fatalf("asking the pty's number: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	return master, "/dev/pts/" + strconv.Itoa(n)
}

// screen collects what the programs on a pty write to it.
type screen struct {
	mu   sync.Mutex
	buf  strings.Builder
	done chan struct{}
}

func readScreen(master *os.File) *screen {
	s := &screen{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			if err != nil { // EIO once every terminal side is closed
				return
			}
		}
	}()
	return s
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startOnTTY starts argv as the leader of a new session whose controlling
// terminal is the pty at tty, with the pty as stdin, stdout and stderr.
func startOnTTY(t *testing.T, tty string, env []string, extra []*os.File, argv ...string) *exec.Cmd {
	t.Helper()
	f, err := os.OpenFile(tty, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, f
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitExit waits up to limit for cmd and returns its exit code, killing
// it (and its process group) when it does not end in time.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration, what string) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not end within %s; killed it", what, limit)
		return -1
	}
}

// lease run in the foreground of a terminal gives COMMAND the terminal:
// a command that reads a line from it gets the line, as it would without
// lease, instead of being stopped by SIGTTIN in a background process
// group.
func TestRunGivesTheCommandTheTerminal(t *testing.T) {
	master, tty := openPTY(t)
	scr := readScreen(master)
	dir := t.TempDir()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t), "DIR=" + dir}
	cmd := startOnTTY(t, tty, env, nil, leaseBin, "run", "tty", "--", "sh", "-c",
		`echo $$ > "$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"; read x; echo "got $x"`)
	defer killLeftovers(t, dir)
	// Typed ahead or not, the line waits in the terminal until read.
	if _, err := io.WriteString(master, "hello\n"); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd, 20*time.Second, "lease run reading the terminal")
	waitScreen(t, scr, "got hello")
	if code != 0 {
		t.Errorf("lease run -- sh -c 'read x; echo got $x' on a terminal: exit %d, want 0\nscreen:\n%s", code, scr)
	}
}

// Ctrl-Z stops COMMAND and lease with it, so that the shell gets the
// terminal back; fg resumes both, and COMMAND has the terminal again.
func TestRunStopsAndResumesWithTheCommand(t *testing.T) {
	master, tty := openPTY(t)
	scr := readScreen(master)
	dir := t.TempDir()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t), "DIR=" + dir, jobShellEnv + "=1"}
	// The job shell reports on the pipe events and waits for "fg" on the
	// pipe fg.
	events, eventsW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fgR, fg, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	shell := startOnTTY(t, tty, env, []*os.File{eventsW, fgR}, self, leaseBin, "run", "tty", "--", "sh", "-c",
		`echo $$ > "$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"; read x; echo "got $x"`)
	eventsW.Close()
	fgR.Close()
	defer fg.Close()
	defer killLeftovers(t, dir)
	ev := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(events)
		for sc.Scan() {
			ev <- sc.Text()
		}
		close(ev)
	}()
	next := func(want string) string {
		t.Helper()
		select {
		case e, ok := <-ev:
			if !ok || !strings.HasPrefix(e, want) {
				t.Fatalf("job shell: got event %q, want %q\nscreen:\n%s", e, want, scr)
			}
			return e
		case <-time.After(20 * time.Second):
			t.Fatalf("job shell: no %q event within 20s\nscreen:\n%s", want, scr)
		}
		return ""
	}

	lease, err := strconv.Atoi(strings.TrimPrefix(next("started "), "started "))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command to start", func() bool { return fileExists(filepath.Join(dir, "pid")) })
	child, err := strconv.Atoi(readFile(t, filepath.Join(dir, "pid")))
	if err != nil {
		t.Fatal(err)
	}
	// Ctrl-Z.
	if _, err := master.Write([]byte{0x1a}); err != nil {
		t.Fatal(err)
	}
	next("stopped")
	if s := procState(child); s != 'T' {
		t.Errorf("after Ctrl-Z the command is in state %q, want stopped (T)", s)
	}
	if s := procState(lease); s != 'T' {
		t.Errorf("after Ctrl-Z lease is in state %q, want stopped (T)", s)
	}
	// fg, then type the line the command waits for.
	if _, err := io.WriteString(fg, "fg\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(master, "hello\n"); err != nil {
		t.Fatal(err)
	}
	if e := next("exit "); e != "exit 0" {
		t.Errorf("lease run after Ctrl-Z and fg: %s, want exit 0\nscreen:\n%s", e, scr)
	}
	waitScreen(t, scr, "got hello")
	if code := waitExit(t, shell, 20*time.Second, "the job shell"); code != 0 {
		t.Errorf("job shell: exit %d", code)
	}
}

// waitScreen waits until the screen shows want.
func waitScreen(t *testing.T, scr *screen, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(scr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; screen:\n%s", want, scr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killLeftovers kills the command whose pid is in dir/pid, if it is left
// (stopped on a terminal, say) when the test fails.
func killLeftovers(t *testing.T, dir string) {
	if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && alive(pid) {
			t.Errorf("the command (pid %d) was left behind; killing it", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// procState is the state letter of pid from /proc (R, S, T, Z...), or 0.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2]
	}
	return 0
}

func init() { testHelpers[jobShellEnv] = jobShell }

// jobShellEnv makes the test binary a tiny job-control shell (see
// jobShell) instead of running the tests.
const jobShellEnv = "LEASE_TEST_JOB_SHELL"

// jobShell does what an interactive shell does with one foreground job:
// it runs os.Args[1:] in a process group of its own that it puts in the
// foreground of its terminal, and when the job stops it takes the
// terminal back and reports "stopped" on fd 3; on "fg" from fd 4 it gives
// the job the terminal again and continues it. When the job exits it
// reports "exit CODE". It is the session leader, so that the job's
// process group is not orphaned and Ctrl-Z really stops it.
func jobShell() int {
	events := os.NewFile(3, "events")
	fg := bufio.NewReader(os.NewFile(4, "fg"))
	say := func(format string, args ...any) { fmt.Fprintf(events, format+"\n", args...) }
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		say("error %v", err)
		return 1
	}
	// Like a shell, ignore SIGTTOU, so as to take the terminal back from
	// a background process group; only now, so that the job does not
	// inherit the ignored signal.
	signal.Ignore(syscall.SIGTTOU)
	pid := cmd.Process.Pid
	say("started %d", pid)
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			say("error %v", err)
			return 1
		}
		switch {
		case ws.Stopped():
			_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, syscall.Getpgrp())
			say("stopped %v", ws.StopSignal())
			if line, err := fg.ReadString('\n'); err != nil || line != "fg\n" {
				say("error reading fg: %q %v", line, err)
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				return 1
			}
			_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pid)
			_ = syscall.Kill(-pid, syscall.SIGCONT)
		case ws.Exited():
			say("exit %d", ws.ExitStatus())
			return 0
		case ws.Signaled():
			say("exit signal %v", ws.Signal())
			return 0
		}
	}
}
