package etcdlease

// settle waits for the etcd lease revocations that earlier calls left
// running, so that a test can count requests or etcd leases right after
// an operation.
func (l *Locker) settle() { l.s.revokes.wg.Wait() }
