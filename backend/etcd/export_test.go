package etcdlease

import "context"

// settle waits for the background work that earlier calls left running
// (etcd lease revocations, pool refills), so that a test can count
// requests or etcd leases right after an operation.
func (l *Locker) settle() {
	l.s.pool.wg.Wait()
	l.s.revokes.idle()
}

// spares is how many etcd leases wait in the Locker's pool.
func (l *Locker) spares() int { return l.s.pool.spares() }

// openStreams opens every keep-alive stream of l, as a Locker that has
// been renewing for a while has them.
func (l *Locker) openStreams() error {
	for n := range kaStreams {
		if _, err := l.s.keeper.stream(context.Background(), n); err != nil {
			return err
		}
	}
	return nil
}

// forgetSoon makes the Locker's next record of a tenure sweep its ledger,
// as a Locker that has acquired ledgerSweep names does.
func forgetSoon(l *Locker) {
	l.s.ledger.mu.Lock()
	l.s.ledger.sweepAt = 0
	l.s.ledger.mu.Unlock()
}
