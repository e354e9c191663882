package sqllease

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/leasekit/lease/backend/sql/internal/classify"
)

// maxAttempts bounds how often one operation is tried when the database
// rolled it back for a reason that says nothing about the lease: a
// deadlock, a serialization failure, or a busy SQLite file.
const maxAttempts = 10

// errOvertaken is what Acquire makes of a takeover statement that returned
// no row: on PostgreSQL, a commit after the statement's snapshot made the
// row held by another, and the statement, which wrote nothing, is sent
// again to a snapshot that shows the holder.
var errOvertaken = errors.New("the row changed after the statement's snapshot; nothing was written")

// retryable reports whether err, from a statement sent on a d pool, means
// the statement was rolled back whole and may simply be sent again. It
// must never accept an error that leaves the outcome unknown (a lost
// connection, a timeout): sending a Release again after one would find
// the tenure gone and report it lost when it was released.
//
// The drivers are recognised through the methods their errors have, so
// that this package imports none of them:
//
//   - SQLState() string (pgx's *pgconn.PgError, lib/pq's *pq.Error, and
//     any driver for a database that reports SQLSTATE): 40001
//     serialization failure, 40P01 deadlock;
//   - on SQLite, Code() int (modernc.org/sqlite's *sqlite.Error): the
//     primary result codes SQLITE_BUSY and SQLITE_LOCKED;
//   - errors of drivers that expose neither, through the classifiers the
//     dialect packages register (backend/sql/mysql: go-sql-driver's
//     1213 deadlock and 1020 record changed).
func retryable(d Dialect, err error) bool {
	if errors.Is(err, errOvertaken) {
		return true
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		switch se.SQLState() {
		case "40001", // serialization_failure (MySQL's deadlock has it too)
			"40P01": // deadlock_detected
			return true
		}
	}
	if d == SQLite {
		var ce interface{ Code() int }
		if errors.As(err, &ce) {
			switch ce.Code() & 0xff {
			case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
				return true
			}
		}
	}
	return classify.Retryable(err)
}

// retry runs fn until it succeeds, fails for a reason retryable does not
// accept, or has been tried maxAttempts times, sleeping a short random
// while between attempts. It sends nothing again after an error that
// leaves the outcome unknown.
func retry(ctx context.Context, d Dialect, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt >= maxAttempts || !retryable(d, err) {
			return err
		}
		backoff := time.Duration(attempt) * time.Millisecond
		t := time.NewTimer(backoff + rand.N(backoff*4))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
