package driver

// Signal is the wake-up side of a Watch: a channel that holds at
// most one pending value, so a waiter that was busy when several changes
// came sees one wake-up, and a Wake never blocks. Embed it in a Watch
// to get its Changed method. Make one with NewSignal.
type Signal struct{ c chan struct{} }

// NewSignal returns a Signal with nothing pending.
func NewSignal() Signal { return Signal{c: make(chan struct{}, 1)} }

// Wake makes a value pending on the channel unless one is already; it
// never blocks.
func (s Signal) Wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// Changed implements Watch's Changed: the channel that receives a
// value after Wake.
func (s Signal) Changed() <-chan struct{} { return s.c }
