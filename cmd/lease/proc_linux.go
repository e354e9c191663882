//go:build linux

package main

import (
	"errors"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// start starts the command with SIGKILL as its parent-death signal, from
// an OS thread locked for as long as the command runs: Linux sends that
// signal when the thread that forked the child exits, not the process,
// and the Go runtime may otherwise end the thread any time. The thread is
// never unlocked, so it ends with the goroutine, after the command.
//
// When lease is in the foreground of its terminal, the command gets the
// foreground instead, so that it can read the terminal and Ctrl-C and
// Ctrl-Z reach it as they would without lease.
func (g *group) start() error {
	g.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if g.tty.foreground() {
		g.cmd.SysProcAttr.Foreground = true
		g.cmd.SysProcAttr.Ctty = g.tty.fd
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := g.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		if g.tty != nil {
			g.followStops()
		}
		g.done <- g.cmd.Wait()
	}()
	err := <-started
	if err != nil {
		// The child may have taken the terminal before exec failed.
		g.tty.takeBack(g.pgid)
	}
	return err
}

// The si_code values of a child's state change (CLD_* in signal.h).
const cldStopped = 5

// followStops waits for the command to exit, leaving it for cmd.Wait to
// reap. Whenever the command stops (Ctrl-Z, or SIGTTIN when it reads the
// terminal from the background), lease stops too, as the rest of the job
// would have, so that the shell sees its job stopped and takes the
// terminal back.
func (g *group) followStops() {
	pid := g.cmd.Process.Pid
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || info.Code != cldStopped {
			return // exited: cmd.Wait reaps it
		}
		// Consume the stop, which WNOWAIT left to be reported.
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
		g.suspend()
	}
}

// suspend stops lease's own process group after the command stopped: it
// takes the terminal back for the shell and sends itself SIGTSTP. It
// returns once lease is continued (resume has run by then), or at once
// when the kernel discarded the SIGTSTP because lease's process group is
// orphaned (no shell to continue it): then the command is continued.
func (g *group) suspend() {
	select {
	case <-g.tty.continued: // stale
	default:
	}
	g.tty.takeBack(g.pgid)
	_ = syscall.Kill(0, syscall.SIGTSTP)
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-g.tty.continued:
	case <-t.C:
		// Continued without our SIGCONT handler having run yet, or never
		// stopped: resume is harmless to repeat.
		g.resume()
	}
}

// resume continues the command when lease is continued, giving it the
// terminal first if lease is in the foreground (fg rather than bg).
func (g *group) resume() {
	g.tty.handOver(g.pgid)
	_ = syscall.Kill(-g.pgid, syscall.SIGCONT)
	if g.tty != nil {
		select {
		case g.tty.continued <- struct{}{}:
		default:
		}
	}
}

// terminal is lease's controlling terminal, when it is lease's stdin.
type terminal struct {
	fd        int
	pgrp      int           // lease's own process group
	continued chan struct{} // resume ran
}

// openTerminal returns lease's terminal, or nil when stdin is not lease's
// controlling terminal (a pipe, a file, a cron job).
func openTerminal() *terminal {
	const fd = 0
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return nil
	}
	if _, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil {
		return nil // a terminal, but not lease's controlling one
	}
	return &terminal{fd: fd, pgrp: unix.Getpgrp(), continued: make(chan struct{}, 1)}
}

// foregroundGroup is the terminal's foreground process group, or -1.
func (t *terminal) foregroundGroup() int {
	pg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	if err != nil {
		return -1
	}
	return pg
}

// foreground reports whether lease's process group has the terminal.
func (t *terminal) foreground() bool {
	return t != nil && t.foregroundGroup() == t.pgrp
}

// handOver gives the terminal to the command's group pgid if lease has it.
func (t *terminal) handOver(pgid int) {
	if t.foreground() {
		t.setForeground(pgid)
	}
}

// takeBack gives the terminal back to lease's group if the command's
// group pgid has it.
func (t *terminal) takeBack(pgid int) {
	if t != nil && t.foregroundGroup() == pgid {
		t.setForeground(t.pgrp)
	}
}

// setForeground makes pgid the terminal's foreground process group. A
// process in a background group that does so gets SIGTTOU, which would
// stop lease, unless it blocks the signal: this thread blocks SIGTTOU and
// SIGTTIN around the call, and only this thread, so that no child ever
// inherits a changed signal mask or disposition.
func (t *terminal) setForeground(pgid int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var block, old unix.Sigset_t
	block.Val[0] = 1<<(uint(unix.SIGTTOU)-1) | 1<<(uint(unix.SIGTTIN)-1)
	_ = unix.PthreadSigmask(unix.SIG_BLOCK, &block, &old)
	_ = unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgid)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
}
