package etcdlease

import (
	"context"
	"time"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ForceRelease implements driver.ForceReleaser. It deletes the key
// whoever holds it, reads how long its etcd lease had left (for the
// ended tenure's Expires), and, when this Locker put that tenure on an
// etcd lease of its own, revokes the lease after the call returns: up to
// three round trips. The next tenure's create revision, its Token, is
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
	s.known.free(name)
	kv := r.PrevKvs[0]
	ended := driver.Tenure{Name: name, Owner: string(kv.Value), Token: uint64(kv.CreateRevision), Expires: time.Now().Round(0)}
	// The key is gone whatever happens next: a failure to read its lease
	// only costs the ended tenure's Expires, which stays "now".
	if t, err := s.describe(ctx, name, kv); err == nil {
		ended.Expires = t.Expires
	}
	// Revoke the lease when this Locker put the tenure on it alone. A
	// group's lease is revoked once its last tenure leaves it, and a lease
	// this Locker did not put the tenure on may carry another Locker's
	// group: it expires by itself.
	id := clientv3.LeaseID(kv.Lease)
	if l, ok := s.known.take(ended); ok && l.id == id && l.solo {
		s.revokes.revoke(ctx, id)
	}
	return ended, true, nil
}
