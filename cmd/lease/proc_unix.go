//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals are the signals lease run passes on to its command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// terminate is what lease run sends first when the lease is lost.
var terminate os.Signal = syscall.SIGTERM

// newProcessGroup puts the command in a process group of its own, so
// that signals sent to the group reach everything it started.
func newProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the command's process group.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	_ = syscall.Kill(-cmd.Process.Pid, s)
}

// killGroup kills whatever is left of the command's process group.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
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
