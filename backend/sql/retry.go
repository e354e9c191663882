package sqllease

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
)

// maxAttempts bounds how often one operation is tried when the database
// rolled it back for a reason that says nothing about the lease: a
// deadlock, a serialization failure, or a busy SQLite file.
const maxAttempts = 10

// retryable reports whether err means the statement was rolled back
// whole and may simply be sent again.
func retryable(err error) bool {
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		switch se.SQLState() {
		case "40001", // serialization_failure
			"40P01": // deadlock_detected
			return true
		}
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1213, // ER_LOCK_DEADLOCK
			1020: // ER_CHECKREAD: record changed since last read
			return true
		}
	}
	var qe *sqlite.Error
	if errors.As(err, &qe) {
		switch qe.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
			return true
		}
	}
	return false
}

// retry runs fn until it succeeds, fails for a reason retryable does not
// accept, or has been tried maxAttempts times, sleeping a short random
// while between attempts.
func retry(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt >= maxAttempts || !retryable(err) {
			return err
		}
		backoff := time.Duration(attempt) * time.Millisecond
		d := backoff + rand.N(backoff*4)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
