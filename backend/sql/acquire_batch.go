package sqllease

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasekit/lease/driver"
)

// maxAcquireBatch bounds the names one batch takeover statement acquires.
const maxAcquireBatch = 256

// Acquires share statements (internal/combine). On PostgreSQL and
// MariaDB 10.5+, while every acquire slot of the pool is taken
// (acquireSlots), an Acquire waits in a queue. The one that gets a turn
// takes every waiting Acquire of a distinct name (up to maxAcquireBatch),
// with those that arrived together with it, and sends them in one
// takeover statement, which does for each what the single statement
// does. A lone Acquire that finds a turn free sends its own statement. Ten
// thousand Acquires at once then cost a few hundred statements and
// commits, not ten thousand. SQLite, whose writes are one at a time
// anyway, and MySQL 8, which has no INSERT ... RETURNING, send one
// statement per Acquire.

// acquireReq is an Acquire waiting in the queue, and its answer.
type acquireReq struct {
	name, owner string
	ttl         time.Duration
	key         [sha256.Size]byte

	t   driver.Tenure
	got bool // the batch statement answered for it (else: send it alone)
}

// errAlone is a queued Acquire's answer when the batch statement had no
// row for it: it sends its own statement, as a lone Acquire does.
var errAlone = errors.New("no answer in the batch statement")

// batches reports whether Acquires on this store share statements.
func (s *store) batches() bool {
	return s.acquireSlots != nil && s.q.acquireBatch != "" && (s.dialect == PostgreSQL || !s.noReturning)
}

// acquireBatched is Acquire on a store whose Acquires share statements
// (internal/combine), whose lanes are the acquire slots: it sends its own
// statement when a slot is free and no other Acquire arrived with it,
// and otherwise waits for a slot, or for another Acquire's batch to
// answer for it. One batch carries no two Acquires of one name: a
// takeover statement cannot upsert a row twice.
func (s *store) acquireBatched(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	r := &acquireReq{name: name, owner: owner, ttl: ttl, key: [sha256.Size]byte(key(name))}
	alone := func(ctx context.Context, r *acquireReq) (driver.Tenure, error) {
		return s.acquireOne(ctx, r.name, r.owner, r.ttl) // on a slot Do took
	}
	t, err := s.acquires.Do(ctx, r, alone, s.acquireBatch)
	if errors.Is(err, errAlone) {
		return s.acquireOne(ctx, name, owner, ttl)
	}
	return t, err
}

// takeSlot waits for one of the acquire slots, which Acquires and
// Releases share, so that together they leave connections to renewals.
// what names the calls the slots serve in the error of a wait that ends
// with ctx ("Acquires", "Acquires and Releases").
func (s *store) takeSlot(ctx context.Context, what string) error {
	select {
	case s.acquireSlots <- struct{}{}:
		return nil
	default:
	}
	s.slotWaiters.Add(1)
	defer s.slotWaiters.Add(-1)
	select {
	case s.acquireSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for one of the %d %s under way to finish: %w", cap(s.acquireSlots), what, ctx.Err())
	}
}

// acquireBatch sends batch in one takeover statement (retried as every
// statement is) and answers each of its Acquires.
func (s *store) acquireBatch(ctx context.Context, batch []*acquireReq) ([]driver.Tenure, []error) {
	sorted := slices.Clone(batch)
	slices.SortFunc(sorted, func(a, b *acquireReq) int { return bytes.Compare(a.key[:], b.key[:]) })
	s.acquireBatches.Add(1)
	err := retry(ctx, s.dialect, func() error {
		for _, r := range sorted {
			r.got = false
		}
		return s.acquireBatchOnce(ctx, sorted)
	})
	if err != nil {
		err = s.fail(err)
	}
	ts, errs := make([]driver.Tenure, len(batch)), make([]error, len(batch))
	for i, r := range batch {
		switch {
		case err != nil:
			errs[i] = err
		case r.got:
			ts[i] = r.t
		default:
			errs[i] = errAlone
		}
	}
	return ts, errs
}

// acquireBatchOnce runs the batch takeover statement once.
func (s *store) acquireBatchOnce(ctx context.Context, batch []*acquireReq) error {
	answer := func(r *acquireReq, owner string, token, exp, nowMs, acq int64) {
		r.t, r.got = taken(r.name, owner, token, exp, nowMs, acq), true
	}
	if s.dialect == PostgreSQL {
		doc := make([][]any, len(batch))
		for i, r := range batch {
			doc[i] = []any{i, hex.EncodeToString(r.key[:]), hex.EncodeToString([]byte(r.name)), r.owner, ttlMillis(r.ttl)}
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
		args = append(args, r.key[:], []byte(r.name), r.owner, ttlMillis(r.ttl), s.host)
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
