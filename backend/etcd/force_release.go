package etcdlease

import (
	"context"
	"time"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ForceRelease implements driver.ForceReleaser. It deletes the key
// whoever holds it, reads how long its etcd lease had left (for the
// ended tenure's Expires), and, when the ledger allows (this Locker put
// that tenure on the lease, and nothing else may be on it), recycles or
// revokes the lease after the call returns: up to three round trips. The next tenure's create revision, its Token, is
// larger, as always.
func (s *store) ForceRelease(ctx context.Context, name string) (driver.Tenure, bool, error) {
	done, err := s.write(ctx)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	r, err := s.client.Delete(ctx, s.key(name), clientv3.WithPrevKV())
	done()
	if err != nil {
		return driver.Tenure{}, false, err
	}
	if len(r.PrevKvs) == 0 {
		return driver.Tenure{}, false, nil
	}
	s.busy.free(name)
	kv := r.PrevKvs[0]
	ended := driver.Tenure{Name: name, Owner: string(kv.Value), Token: uint64(kv.CreateRevision), Expires: time.Now().Round(0)}
	// The key is gone whatever happens next: a failure to read its lease
	// only costs the ended tenure's Expires, which stays "now".
	if t, err := s.describe(ctx, name, kv); err == nil {
		ended.Expires = t.Expires
	}
	// The lease goes back to the pool or is revoked as the ledger allows;
	// a lease this Locker did not put the tenure on expires by itself.
	s.dispose(ctx, s.ledger.removed(ended, clientv3.LeaseID(kv.Lease), false)...)
	return ended, true, nil
}
