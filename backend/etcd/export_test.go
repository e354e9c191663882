package etcdlease

// settle waits for the background work that earlier calls left running
// (etcd lease revocations, pool refills), so that a test can count
// requests or etcd leases right after an operation.
func (l *Locker) settle() {
	l.s.pool.wg.Wait()
	l.s.revokes.idle()
}

// spares is how many etcd leases wait in the Locker's pool.
func (l *Locker) spares() int { return l.s.pool.spares() }
