//go:build !linux

package testserver

import "os/exec"

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

func released() {}

// waitNoReap is not available: the process is reaped without a chance to
// kill its group's stragglers first.
func waitNoReap(pid int) bool { return false }

// descendants finds no processes outside Linux: Kill reaches only the
// server's process group there.
func descendants(pid int) []int { return nil }

func gone(id int) bool { return true }
