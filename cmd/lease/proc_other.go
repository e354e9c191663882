//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// forwardedSignals are the signals lease run passes on to its command.
var forwardedSignals = []os.Signal{os.Interrupt}

// terminate is what lease run sends first when the lease is lost.
var terminate os.Signal = os.Interrupt

// newProcessGroup does nothing: process groups are a Unix feature.
func newProcessGroup(cmd *exec.Cmd) {}

// signalGroup sends sig to the command, or kills it where the system
// cannot deliver sig.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if err := cmd.Process.Signal(sig); err != nil {
		_ = cmd.Process.Kill()
	}
}

// killGroup kills the command.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// exitCode is the command's exit code.
func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }

// signalExitCode is the exit status for an interrupt.
func signalExitCode(sig os.Signal) int { return 130 }
