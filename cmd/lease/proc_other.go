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

// isContinue reports whether sig continues a stopped process: none here.
func isContinue(os.Signal) bool { return false }

// group is the running command. Process groups, and the watcher that
// kills one when lease dies, are a Unix feature.
type group struct {
	cmd  *exec.Cmd
	done chan error
}

// watcherEnv makes the lease binary run as a group's watcher (Unix only).
const watcherEnv = "LEASE_INTERNAL_WATCHER"

// startGroup starts cmd.
func startGroup(cmd *exec.Cmd) (*group, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &group{cmd: cmd, done: make(chan error, 1)}
	go func() { g.done <- cmd.Wait() }()
	return g, nil
}

// signal sends sig to the command, or kills it where the system cannot
// deliver sig.
func (g *group) signal(sig os.Signal) {
	if err := g.cmd.Process.Signal(sig); err != nil {
		_ = g.cmd.Process.Kill()
	}
}

// kill kills the command.
func (g *group) kill() { _ = g.cmd.Process.Kill() }

// finish is for when the command has exited.
func (g *group) finish() {}

// watcher is a Unix feature.
func watcher() int { return exitUsage }

// exitCode is the command's exit code.
func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }

// signalExitCode is the exit status for an interrupt.
func signalExitCode(sig os.Signal) int { return 130 }
