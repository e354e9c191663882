package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
)

// On MySQL and MariaDB a busy Acquire's upsert locks the row and opens a
// read-write transaction even though it changes nothing. So a store
// remembers the names it found held by another owner, and until the
// holder's time is up (by the remaining time the database's clock gave,
// counted on this process's monotonic clock) an Acquire of such a name by
// another owner reads the row first (q.acquireRead, no lock, no write). A
// read that finds the name still held is the answer, exactly the row the
// upsert would have returned; one that finds it free, ended or the
// caller's own goes on to the upsert. PostgreSQL's takeover statement
// already leaves a held row untouched, and SQLite's writes are local.

// maxHeldNames bounds the names a store remembers as held.
const maxHeldNames = 4096

// heldNames is the names a store found held by another owner.
type heldNames struct {
	mu sync.Mutex
	m  map[string]heldBy
}

// heldBy is a name's holder and the end of its time, as last seen.
type heldBy struct {
	owner string
	until time.Time // this process's clock, monotonic
}

// note remembers that owner holds name for remaining from now.
func (h *heldNames) note(name, owner string, remaining time.Duration) {
	if remaining <= 0 {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[string]heldBy)
	}
	if _, ok := h.m[name]; !ok && len(h.m) >= maxHeldNames {
		for n, e := range h.m {
			if !now.Before(e.until) {
				delete(h.m, n)
			}
		}
		if len(h.m) >= maxHeldNames {
			clear(h.m) // all still held: start over rather than grow
		}
	}
	h.m[name] = heldBy{owner: owner, until: now.Add(remaining)}
}

// heldFrom reports whether name was last seen held by an owner other
// than owner, with time left.
func (h *heldNames) heldFrom(name, owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[name]
	if ok && !time.Now().Before(e.until) {
		delete(h.m, name)
		return false
	}
	return ok && e.owner != owner
}

// forget drops name: its tenure ended or changed hands.
func (h *heldNames) forget(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, name)
}

// readsFirst reports whether busy Acquires on this store read first.
func (s *store) readsFirst() bool {
	return s.dialect == MySQL && s.q.acquireRead != ""
}

// acquireHeld is Acquire of a name another owner was seen to hold: the
// holder's row when it still holds it (ok), otherwise ok is false and the
// caller sends the takeover statement.
func (s *store) acquireHeld(ctx context.Context, name, owner string) (t driver.Tenure, ok bool, err error) {
	var (
		gotOwner               string
		token, exp, nowMs, acq int64
	)
	err = retry(ctx, s.dialect, func() error {
		return s.db.QueryRowContext(ctx, s.q.acquireRead, key(name)).Scan(&gotOwner, &token, &exp, &nowMs, &acq)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		s.held.forget(name)
		return driver.Tenure{}, false, nil
	case err != nil:
		return driver.Tenure{}, false, s.fail(err)
	case gotOwner == owner || exp <= nowMs:
		s.held.forget(name)
		return driver.Tenure{}, false, nil
	}
	t = taken(name, gotOwner, token, exp, nowMs, acq)
	s.held.note(name, gotOwner, t.Remaining)
	return t, true, nil
}
