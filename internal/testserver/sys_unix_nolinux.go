//go:build unix && !linux

package testserver

import "syscall"

// setPdeathsig does nothing: only Linux has a parent-death signal. A test
// binary that crashes may leave its servers running here.
func setPdeathsig(a *syscall.SysProcAttr) {}
