package sqllease

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
)

var _ driver.BatchRenewer = (*store)(nil)

// maxBatchChunk is the most distinct tenures one batch statement renews.
// The whole chunk goes as one parameter (a JSON document of about 120
// bytes a tenure), so no parameter limit applies; the bound keeps each
// statement's locks, and the document, small.
const maxBatchChunk = 1000

// batchSingles bounds the single Renews a batch runs at once on a server
// that cannot renew in batches (MySQL before 8.0.4, MariaDB before 10.6).
const batchSingles = 8

// batchID names one tenure: its row's key, owner and token.
type batchID struct {
	key   [sha256.Size]byte
	owner string
	token int64
}

// batchRow is one distinct tenure of a batch, and what its statement did
// with it.
type batchRow struct {
	id batchID
	// ttl is the ttl, in ms, of the batch's last item for this tenure:
	// renewing the same tenure several times in a row leaves the row's
	// expiry at now + the last one's ttl.
	ttl int64
	// item is the index of the batch's first item for this tenure.
	item int
	// ok, exp and acq are the statement's answer: renewed, to expires_at
	// exp, and the row's acquired_at (0 on MySQL); err is its error.
	ok       bool
	exp, acq int64
	err      error
}

// RenewBatch implements driver.BatchRenewer: each item is renewed as
// Renew would renew it, with the same outcome, in one statement per
// maxBatchChunk distinct tenures (on MySQL and MariaDB, a transaction of
// one statement, or of two when some tenure was not renewed).
//
// Items for the same tenure (name, owner and token) are renewed once,
// for the ttl of the last of them, and each gets what a sequence of
// Renews at the statement's now would give it: renewed (to now + its own
// ttl) when the tenure was intact, lost otherwise. Items of one name but
// different tenures never interfere: at most one of them is the row's.
//
// The tenures are renewed in order of their keys, so that two batches
// meeting on the same rows lock them in the same order. A statement the
// database rolled back whole is sent again, as every operation's is. When
// a statement fails otherwise, the error is RenewBatch's when it was the
// first (nothing was renewed), and otherwise the outcome of each item it
// and the chunks after it concerned, the earlier chunks' renewals being
// reported as they happened.
//
// On MySQL before 8.0.4 and MariaDB before 10.6, which have no
// JSON_TABLE, each distinct tenure is renewed by a single Renew,
// batchSingles at a time, and every item has its own outcome.
func (s *store) RenewBatch(ctx context.Context, items []driver.RenewItem) ([]driver.RenewOutcome, error) {
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	// One row per distinct tenure; rowOf[i] is items[i]'s.
	rows := make([]batchRow, 0, len(items))
	rowOf := make([]int, len(items))
	index := make(map[batchID]int, len(items))
	for i, it := range items {
		id := batchID{key: sha256.Sum256([]byte(it.Tenure.Name)), owner: it.Tenure.Owner, token: int64(it.Tenure.Token)}
		r, ok := index[id]
		if !ok {
			r = len(rows)
			index[id] = r
			rows = append(rows, batchRow{id: id, item: i})
		}
		rows[r].ttl = ttlMillis(it.TTL)
		rowOf[i] = r
	}

	if s.dialect == MySQL && s.noJSONTable {
		s.renewEach(ctx, items, rows)
	} else if err := s.renewChunks(ctx, rows, index); err != nil {
		return nil, err
	}

	out := make([]driver.RenewOutcome, len(items))
	for i, it := range items {
		row := &rows[rowOf[i]]
		switch {
		case row.err != nil:
			out[i].Err = row.err
		case row.ok:
			// The statement's now, and this item's expiry at it.
			exp := row.exp - row.ttl + ttlMillis(it.TTL)
			out[i] = driver.RenewOutcome{Tenure: tenure(it.Tenure.Name, it.Tenure.Owner, int64(it.Tenure.Token), exp, row.acq), OK: true}
		}
	}
	return out, nil
}

// renewChunks renews rows in order of their keys, s.batchChunk to a
// statement, and records the answers in them. It returns an error only
// when the first statement failed; when a later one does, the error is
// recorded in its rows and those of the statements after it.
func (s *store) renewChunks(ctx context.Context, rows []batchRow, index map[batchID]int) error {
	order := make([]int, len(rows))
	for r := range order {
		order[r] = r
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(rows[a].id.key[:], rows[b].id.key[:]) })
	chunk := max(s.batchChunk, 1)
	for start := 0; start < len(order); start += chunk {
		part := order[start:min(start+chunk, len(order))]
		err := retry(ctx, s.dialect, func() error {
			for _, r := range part {
				rows[r].ok = false
			}
			return s.renewChunk(ctx, rows, part, index)
		})
		if err == nil {
			continue
		}
		err = s.fail(err)
		if start == 0 {
			return err
		}
		for _, r := range order[start:] {
			rows[r].ok, rows[r].err = false, err
		}
		break
	}
	return nil
}

// renewChunk renews the tenures rows[r] for r in part with one statement
// (a transaction on MySQL) and records the answers in them.
func (s *store) renewChunk(ctx context.Context, rows []batchRow, part []int, index map[batchID]int) error {
	doc := batchDoc(rows, part)
	switch s.dialect {
	case MySQL:
		return s.renewChunkTx(ctx, rows, part, doc)
	case SQLite:
		res, err := s.db.QueryContext(ctx, s.q.renewBatch, doc)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			var (
				k        []byte
				id       batchID
				exp, acq int64
			)
			if err := res.Scan(&k, &id.owner, &id.token, &exp, &acq); err != nil {
				return err
			}
			if len(k) != len(id.key) {
				return errUnasked
			}
			copy(id.key[:], k)
			r, ok := index[id]
			if !ok {
				return errUnasked
			}
			rows[r].ok, rows[r].exp, rows[r].acq = true, exp, acq
		}
		return res.Err()
	default: // PostgreSQL
		res, err := s.db.QueryContext(ctx, s.q.renewBatch, doc)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			var (
				j        int
				exp, acq int64
			)
			if err := res.Scan(&j, &exp, &acq); err != nil {
				return err
			}
			if j < 0 || j >= len(part) {
				return errUnasked
			}
			r := part[j]
			rows[r].ok, rows[r].exp, rows[r].acq = true, exp, acq
		}
		return res.Err()
	}
}

// errUnasked is a batch statement's answer about a tenure it was not
// asked about: a bug, never a lease outcome.
var errUnasked = errors.New("the batch renewal returned a row for a tenure it was not given")

// renewChunkTx is renewChunk on MySQL, which has no UPDATE ... RETURNING:
// in one transaction, the batch update, which hands back its now (or 0
// when it renewed nothing), then, unless it changed every row, a read of
// the rows that match the chunk's tenures. The update keeps the rows it
// renewed locked until the commit, so the read sees them as it left
// them: a row was renewed exactly when its expiry is now + its ttl
// (a row that matched but had expired keeps an expiry at or before now,
// and its token, for good).
func (s *store) renewChunkTx(ctx context.Context, rows []batchRow, part []int, doc string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, s.q.renewBatch, doc)
	if err != nil {
		return err
	}
	now, err := res.LastInsertId()
	if err != nil {
		return err
	}
	changed, err := res.RowsAffected()
	if err != nil {
		return err
	}
	switch {
	case now == 0: // nothing renewed
	case changed == int64(len(part)):
		// Every tenure's row changed, and only a renewal changes one.
		for _, r := range part {
			rows[r].ok, rows[r].exp = true, now+rows[r].ttl
		}
	default:
		q, err := tx.QueryContext(ctx, s.q.renewBatchRead, doc)
		if err != nil {
			return err
		}
		defer q.Close()
		for q.Next() {
			var j int
			var exp int64
			if err := q.Scan(&j, &exp); err != nil {
				return err
			}
			if j < 0 || j >= len(part) {
				return errUnasked
			}
			if r := part[j]; exp == now+rows[r].ttl {
				rows[r].ok, rows[r].exp = true, exp
			}
		}
		if err := q.Err(); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// batchDoc is the batch document of the tenures rows[r] for r in part: a
// JSON array of [index, "hex key", "owner", token, ttl ms], index being
// the element's position. Owners are valid UTF-8 without NUL (the Locker
// checks), so they go as JSON strings, which every dialect's JSON
// functions give back byte for byte.
func batchDoc(rows []batchRow, part []int) string {
	b := make([]byte, 0, len(part)*(2*sha256.Size+64))
	b = append(b, '[')
	for j, r := range part {
		row := &rows[r]
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(j), 10)
		b = append(b, ",\""...)
		b = hex.AppendEncode(b, row.id.key[:])
		b = append(b, "\","...)
		owner, _ := json.Marshal(row.id.owner) // a string always marshals
		b = append(b, owner...)
		b = append(b, ',')
		b = strconv.AppendInt(b, row.id.token, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, row.ttl, 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b)
}

// renewEach renews each row's tenure with Renew, for its ttl,
// batchSingles at a time: the batch of a server without JSON_TABLE.
func (s *store) renewEach(ctx context.Context, items []driver.RenewItem, rows []batchRow) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(batchSingles, len(rows)) {
		wg.Go(func() {
			for r := range work {
				row := &rows[r]
				t, ok, err := s.Renew(ctx, items[row.item].Tenure, time.Duration(row.ttl)*time.Millisecond)
				row.ok, row.err = ok, err
				if ok {
					row.exp, row.acq = t.Expires.UnixMilli(), t.Acquired.UnixMilli()
				}
			}
		})
	}
	for r := range rows {
		work <- r
	}
	close(work)
	wg.Wait()
}
