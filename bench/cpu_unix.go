//go:build unix

package main

import (
	"syscall"
	"time"
)

// selfCPU is this process's user and system CPU time so far.
func selfCPU() (time.Duration, bool) {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0, false
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano()), true
}
