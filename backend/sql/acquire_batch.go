package sqllease

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/batchctx"
)

// maxAcquireBatch bounds the names one batch takeover statement acquires.
const maxAcquireBatch = 256

// Acquires in a burst share statements. While every acquire slot of the
// pool is taken (acquireSlots), an Acquire waits in a queue; the next one
// to get a slot takes every waiting Acquire of a distinct name (up to
// maxAcquireBatch) and sends them in one takeover statement, which does
// for each what the single statement does. A lone Acquire, or one that
// finds a slot free, sends its own statement as before. Ten thousand
// Acquires at once then cost a few hundred statements and commits, not
// ten thousand. PostgreSQL and MariaDB 10.5+ batch (q.acquireBatch);
// SQLite, whose writes are one at a time anyway, and MySQL 8, which has
// no INSERT ... RETURNING, send one statement per Acquire.

// acquireReq is an Acquire waiting in the queue, and its answer.
type acquireReq struct {
	ctx         context.Context
	name, owner string
	ttl         int64 // ms
	key         [sha256.Size]byte

	taken bool          // in a batch (under acquireQueue.mu)
	done  chan struct{} // closed once t, got and err are set
	t     driver.Tenure
	got   bool // the batch statement answered for it (else: send it alone)
	err   error
}

// acquireQueue is the Acquires waiting for a batch.
type acquireQueue struct {
	mu   sync.Mutex
	reqs []*acquireReq
}

// take removes and returns the waiting Acquires of distinct names, up to
// maxAcquireBatch, oldest first.
func (q *acquireQueue) take() []*acquireReq {
	q.mu.Lock()
	defer q.mu.Unlock()
	var batch []*acquireReq
	seen := map[[sha256.Size]byte]bool{}
	rest := q.reqs[:0]
	for _, r := range q.reqs {
		if len(batch) < maxAcquireBatch && !seen[r.key] {
			seen[r.key] = true
			r.taken = true
			batch = append(batch, r)
		} else {
			rest = append(rest, r)
		}
	}
	clear(q.reqs[len(rest):])
	q.reqs = rest
	return batch
}

// leave removes r from the queue unless a batch took it; it reports
// whether it did.
func (q *acquireQueue) leave(r *acquireReq) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.taken {
		return false
	}
	if i := slices.Index(q.reqs, r); i >= 0 {
		q.reqs = slices.Delete(q.reqs, i, i+1)
	}
	return true
}

// batches reports whether Acquires on this store share statements.
func (s *store) batches() bool {
	return s.acquireSlots != nil && s.q.acquireBatch != "" && (s.dialect == PostgreSQL || !s.noReturning)
}

// acquireQueued is Acquire while every acquire slot is taken: it waits in
// the queue for a slot, or for another Acquire's batch to answer for it.
func (s *store) acquireQueued(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	slots := s.acquireSlots
	r := &acquireReq{ctx: ctx, name: name, owner: owner, ttl: ttlMillis(ttl), key: [sha256.Size]byte(key(name)), done: make(chan struct{})}
	s.queue.mu.Lock()
	s.queue.reqs = append(s.queue.reqs, r)
	s.queue.mu.Unlock()
	for {
		select {
		case <-r.done:
			if r.err != nil || r.got {
				return r.t, r.err
			}
			// The batch had no answer for it: alone, as Acquire does.
			return s.acquireOne(ctx, name, owner, ttl)
		case slots <- struct{}{}:
			batch := s.queue.take()
			if len(batch) > 0 {
				s.acquireBatch(batch)
			}
			<-slots
			// r is answered now, or in a batch under way.
		case <-ctx.Done():
			if s.queue.leave(r) {
				return driver.Tenure{}, fmt.Errorf("waiting for one of the %d Acquires under way to finish: %w", cap(slots), ctx.Err())
			}
			return driver.Tenure{}, ctx.Err() // sent in a batch: its outcome is unknown
		}
	}
}

// acquireBatch sends batch in one takeover statement (retried as every
// statement is) and answers each of its Acquires.
func (s *store) acquireBatch(batch []*acquireReq) {
	slices.SortFunc(batch, func(a, b *acquireReq) int { return bytes.Compare(a.key[:], b.key[:]) })
	ctxs := make([]context.Context, len(batch))
	for i, r := range batch {
		ctxs[i] = r.ctx
	}
	ctx, cancel := batchctx.New(context.Background(), ctxs)
	defer cancel()
	s.acquireBatches.Add(1)
	err := retry(ctx, s.dialect, func() error {
		for _, r := range batch {
			r.got = false
		}
		return s.acquireBatchOnce(ctx, batch)
	})
	if err != nil {
		err = s.fail(err)
	}
	for _, r := range batch {
		if err != nil {
			r.err = err
		}
		close(r.done)
	}
}

// acquireBatchOnce runs the batch takeover statement once.
func (s *store) acquireBatchOnce(ctx context.Context, batch []*acquireReq) error {
	answer := func(r *acquireReq, owner string, token, exp, nowMs, acq int64) {
		r.t, r.got = taken(r.name, owner, token, exp, nowMs, acq), true
	}
	if s.dialect == PostgreSQL {
		doc := make([][]any, len(batch))
		for i, r := range batch {
			doc[i] = []any{i, hex.EncodeToString(r.key[:]), hex.EncodeToString([]byte(r.name)), r.owner, r.ttl}
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		rows, err := s.db.QueryContext(ctx, s.q.acquireBatch, string(b), s.host)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				i                      int
				owner                  string
				token, exp, nowMs, acq int64
			)
			if err := rows.Scan(&i, &owner, &token, &exp, &nowMs, &acq); err != nil {
				return err
			}
			if i < 0 || i >= len(batch) {
				return errUnasked
			}
			answer(batch[i], owner, token, exp, nowMs, acq)
		}
		return rows.Err()
	}
	// MariaDB: a row of values per name.
	stmt := strings.Replace(s.q.acquireBatch, "{ROWS}", strings.TrimSuffix(strings.Repeat(s.q.acquireBatchRow+", ", len(batch)), ", "), 1)
	args := make([]any, 0, 5*len(batch))
	at := make(map[[sha256.Size]byte]*acquireReq, len(batch))
	for _, r := range batch {
		args = append(args, r.key[:], []byte(r.name), r.owner, r.ttl, s.host)
		at[r.key] = r
	}
	rows, err := s.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k                      []byte
			owner                  string
			token, exp, nowMs, acq int64
		)
		if err := rows.Scan(&k, &owner, &token, &exp, &nowMs, &acq); err != nil {
			return err
		}
		r := at[[sha256.Size]byte(k)]
		if len(k) != sha256.Size || r == nil {
			return errUnasked
		}
		answer(r, owner, token, exp, nowMs, acq)
	}
	return rows.Err()
}
