//go:build unix && !linux

package main

import "syscall"

// start starts the command. Outside Linux there is no parent-death
// signal: the watcher alone kills the group when lease dies.
//
// Nor does lease hand the terminal over: following the command's stops
// needs waitid, which lease uses on Linux only. A command that reads the
// terminal is stopped by SIGTTIN, as before.
func (g *group) start() error {
	if err := g.cmd.Start(); err != nil {
		return err
	}
	go func() { g.done <- g.cmd.Wait() }()
	return nil
}

// resume continues the command when lease is continued.
func (g *group) resume() { _ = syscall.Kill(-g.pgid, syscall.SIGCONT) }

// terminal is unused outside Linux.
type terminal struct{}

func openTerminal() *terminal    { return nil }
func (t *terminal) takeBack(int) {}
