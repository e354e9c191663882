package sqllease

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/leasekit/lease/driver"
)

// releaseShared ends the tenures of Releases that waited for a turn in
// one statement (q.releaseBatch), each exactly as its own statement
// would: released when it was intact, not when it had expired, was
// released or was taken over. A tenure named twice is released by its
// first Release, and the second is told it was not held, as two
// statements one after the other would tell them.
func (s *store) releaseShared(ctx context.Context, ts []driver.Tenure) ([]bool, []error) {
	type row struct {
		i   int
		key [sha256.Size]byte
		t   driver.Tenure
	}
	rows := make([]row, 0, len(ts))
	seen := make(map[batchID]bool, len(ts))
	for i, t := range ts {
		id := batchID{key: sha256.Sum256([]byte(t.Name)), owner: t.Owner, token: int64(t.Token)}
		if seen[id] {
			continue
		}
		seen[id] = true
		rows = append(rows, row{i: i, key: id.key, t: t})
	}
	// Key order, so that statements meeting on the same rows lock them
	// in the same order.
	slices.SortFunc(rows, func(a, b row) int { return bytes.Compare(a.key[:], b.key[:]) })
	doc := make([][]any, len(rows))
	for k, r := range rows {
		doc[k] = []any{r.i, hex.EncodeToString(r.key[:]), r.t.Owner, int64(r.t.Token)}
	}
	released := make([]bool, len(ts))
	errs := make([]error, len(ts))
	b, err := json.Marshal(doc)
	if err == nil {
		err = retry(ctx, s.dialect, func() error {
			clear(released)
			res, err := s.db.QueryContext(ctx, s.q.releaseBatch, string(b))
			if err != nil {
				return err
			}
			defer res.Close()
			for res.Next() {
				var (
					i      int
					notify any
				)
				if err := res.Scan(&i, &notify); err != nil {
					return err
				}
				if i < 0 || i >= len(ts) {
					return errUnasked
				}
				released[i] = true
			}
			return res.Err()
		})
	}
	if err != nil {
		err = s.fail(err)
		for i := range errs {
			errs[i] = err
		}
	}
	return released, errs
}
