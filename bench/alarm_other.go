//go:build !linux

package main

import "time"

// alarm waits until a point in time. Outside Linux it is a time.Timer,
// whose waits under a millisecond can last about a millisecond on some
// systems: the measured round trip the net mode prints shows it.
type alarm struct{ t *time.Timer }

func newAlarm() (*alarm, error) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &alarm{t: t}, nil
}

// until returns at t or a little after it; at once if t has passed.
func (a *alarm) until(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	a.t.Reset(d)
	<-a.t.C
	return nil
}

func (a *alarm) Close() { a.t.Stop() }
