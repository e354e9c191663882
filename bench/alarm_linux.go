//go:build linux

package main

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// alarm waits until a point in time with the kernel's precision: a
// timerfd read through Go's network poller, which wakes when the timer
// fires. time.Sleep and time.Timer round a wait under a millisecond up to
// about a millisecond on Linux (the poller's epoll timeout is in whole
// milliseconds), which would turn a 0.5ms round trip into more than 2ms;
// a timerfd fires within the kernel's timer slack (50µs by default).
type alarm struct {
	fd int
	f  *os.File
}

func newAlarm() (*alarm, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	// A non-blocking descriptor: os.NewFile registers it with the poller.
	return &alarm{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}, nil
}

// until returns at t or a little after it; at once if t has passed.
func (a *alarm) until(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	// A zero it_value disarms the timer: d is at least 1ns here.
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(a.fd, 0, &its, nil); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	var expirations [8]byte
	_, err := a.f.Read(expirations[:])
	return err
}

func (a *alarm) Close() { _ = a.f.Close() }
