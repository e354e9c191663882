//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// forwardedSignals are the signals lease run passes on to its command.
// SIGCONT too: when lease is continued (fg, bg, kill -CONT), so is the
// command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGCONT}

// terminate is what lease run sends first when the lease is lost.
var terminate os.Signal = syscall.SIGTERM

// isContinue reports whether sig is SIGCONT, which is passed on but never
// ends the wait for the lease.
func isContinue(sig os.Signal) bool { return sig == syscall.SIGCONT }

// group is a running COMMAND and the process group it runs in.
//
// The group is led by a watcher: a copy of lease (see watcher) started
// first, in a process group of its own, which COMMAND then joins. The
// watcher waits on a pipe whose other end only lease holds. When lease
// dies, however it dies (SIGKILL included), the kernel closes that end,
// and the watcher kills the whole group: COMMAND and everything it
// started. On Linux COMMAND also gets SIGKILL as its parent-death signal,
// which covers the moment between its fork and its joining the group.
// When COMMAND exits, lease tells the watcher so and it exits quietly.
type group struct {
	cmd  *exec.Cmd
	pgid int // the watcher's pid

	watcher  *exec.Cmd
	watchEnd *os.File // lease's end of the watcher's pipe

	tty  *terminal // nil unless lease runs on its terminal
	done chan error
	once sync.Once
}

// watcherEnv makes the lease binary run as a group's watcher.
const watcherEnv = "LEASE_INTERNAL_WATCHER"

// startGroup starts the watcher, then cmd in the watcher's process group,
// in the terminal's foreground when lease is in it.
func startGroup(cmd *exec.Cmd) (*group, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to guard the command: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("guarding the command: %w", err)
	}
	watcher := exec.Command(self)
	watcher.Env = append(os.Environ(), watcherEnv+"=1")
	watcher.ExtraFiles = []*os.File{r}
	watcher.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = watcher.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the process that guards the command: %w", err)
	}
	g := &group{cmd: cmd, pgid: watcher.Process.Pid, watcher: watcher, watchEnd: w, tty: openTerminal(), done: make(chan error, 1)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: g.pgid}
	if err := g.start(); err != nil {
		g.release()
		return nil, err
	}
	return g, nil
}

// signal sends sig to the command's process group.
func (g *group) signal(sig os.Signal) {
	if isContinue(sig) {
		g.resume()
		return
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	_ = syscall.Kill(-g.pgid, s)
}

// kill kills whatever is left of the command's process group (the watcher
// too).
func (g *group) kill() {
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
}

// finish is for when the command has exited: lease takes its terminal
// back, and the watcher exits without touching the group.
func (g *group) finish() {
	g.tty.takeBack(g.pgid)
	g.release()
}

// release tells the watcher to exit quietly and waits for it.
func (g *group) release() {
	g.once.Do(func() {
		_, _ = g.watchEnd.Write([]byte{1})
		g.watchEnd.Close()
		done := make(chan struct{})
		go func() {
			_ = g.watcher.Wait()
			close(done)
		}()
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			_ = g.watcher.Process.Kill()
			<-done
		}
	})
}

// watcher is the watcher's main (see group): it waits for lease to write a
// byte, or for the pipe to close without one because lease died, and then
// kills its process group, COMMAND's. It ignores the signals that the
// terminal or lease send to the whole group, so that it keeps guarding
// while the command handles them.
func watcher() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	pipe := os.NewFile(3, "lease")
	b := make([]byte, 1)
	for {
		n, err := pipe.Read(b)
		if n == 1 {
			return 0 // the command exited and lease carries on
		}
		if err != nil {
			break // lease is gone
		}
	}
	_ = syscall.Kill(0, syscall.SIGKILL)
	return 1
}

// exitCode is the command's exit status as a shell reports it: its own
// code, or 128 plus the signal that killed it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalExitCode is the shell's exit status for death by sig.
func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailure
}
