//go:build !unix

package testserver

import (
	"errors"
	"syscall"
)

// supported reports whether this system can run test servers: the
// helpers need Unix process groups and signals.
const supported = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func sendSignal(pid int, group bool, s sig) error {
	return errors.New("testserver: signals need a Unix system")
}
