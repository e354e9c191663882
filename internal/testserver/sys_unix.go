//go:build unix

package testserver

import (
	"fmt"
	"syscall"
)

// supported reports whether this system can run test servers.
const supported = true

// sysProcAttr puts a server in its own process group (so that it can be
// killed with everything it forked, and a terminal's Ctrl-C reaches only
// the test binary, which then cleans up) and, on Linux, has it killed if
// the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(a)
	return a
}

var signals = map[sig]syscall.Signal{
	sigTerm: syscall.SIGTERM,
	sigInt:  syscall.SIGINT,
	sigQuit: syscall.SIGQUIT,
	sigKill: syscall.SIGKILL,
	sigStop: syscall.SIGSTOP,
	sigCont: syscall.SIGCONT,
}

// sendSignal sends s to pid, or to the process group pid leads.
func sendSignal(pid int, group bool, s sig) error {
	ss, ok := signals[s]
	if !ok {
		return fmt.Errorf("unknown signal %v", s)
	}
	if group {
		pid = -pid
	}
	return syscall.Kill(pid, ss)
}
