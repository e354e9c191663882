package sqllease

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"time"

	"github.com/leasekit/lease/driver"
)

// The store's operations: one statement each (statements_*.go), every
// "now" in it the database's clock. driver.NewLocker checks the arguments
// and turns the outcomes into leases and errors.

// key is the row's primary key: the SHA-256 of the name.
func key(name string) []byte {
	k := sha256.Sum256([]byte(name))
	return k[:]
}

// ttlMillis rounds ttl up to whole milliseconds: a store never shortens a
// tenure.
func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// tenure is a row as the statements return it. acquiredMs is the row's
// acquired_at: when the tenure began, by the database's clock.
func tenure(name, owner string, token, expiresMs, acquiredMs int64) driver.Tenure {
	return driver.Tenure{Name: name, Owner: owner, Token: uint64(token), Expires: time.UnixMilli(expiresMs), Acquired: acquiredAt(acquiredMs)}
}

// acquiredAt is the time of an acquired_at value; zero for a value that
// cannot be one (a row written by hand with 0).
func acquiredAt(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Acquire implements driver.Store with the takeover statement (q.acquire),
// except on MySQL 8 (see the package documentation). On a bounded pool,
// at most acquireSlots Acquires run at once, leaving connections free
// for renewals and releases; while all are taken, Acquires wait in a
// queue and share statements (acquire_batch.go). The statement
// returns the row it left, the holder's when the name is held.
func (s *store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	if err := s.setup(ctx); err != nil {
		return driver.Tenure{}, err
	}
	if slots := s.acquireSlots; slots != nil {
		if s.batches() {
			return s.acquireBatched(ctx, name, owner, ttl) // see acquire_batch.go
		}
		if err := s.takeSlot(ctx, "Acquires"); err != nil {
			return driver.Tenure{}, err
		}
		defer func() { <-slots }()
	}
	return s.acquireOne(ctx, name, owner, ttl)
}

// acquireOne is Acquire's takeover statement for one name, after a read
// on MySQL when the name was seen held by another owner (held.go).
func (s *store) acquireOne(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	reads := s.readsFirst()
	if reads && s.held.heldFrom(name, owner) {
		if t, ok, err := s.acquireHeld(ctx, name, owner); ok || err != nil {
			return t, err
		}
	}
	var (
		gotOwner               string
		token, exp, nowMs, acq int64
	)
	err := retry(ctx, s.dialect, func() error {
		if s.noReturning {
			return s.acquireTx(ctx, name, owner, ttl, &gotOwner, &token, &exp, &nowMs, &acq)
		}
		err := s.db.QueryRowContext(ctx, s.q.acquire, key(name), []byte(name), owner, ttlMillis(ttl), s.host).
			Scan(&gotOwner, &token, &exp, &nowMs, &acq)
		if errors.Is(err, sql.ErrNoRows) {
			err = errOvertaken // PostgreSQL: see its acquire statement
		}
		return err
	})
	if err != nil {
		return driver.Tenure{}, s.fail(err)
	}
	t := taken(name, gotOwner, token, exp, nowMs, acq)
	if reads {
		if gotOwner != owner {
			s.held.note(name, gotOwner, t.Remaining)
		} else {
			s.held.forget(name)
		}
	}
	return t, nil
}

// taken is the row a takeover statement returned, at its now nowMs: the
// caller's tenure, or the holder's with its remaining time.
func taken(name, owner string, token, expiresMs, nowMs, acquiredMs int64) driver.Tenure {
	t := tenure(name, owner, token, expiresMs, acquiredMs)
	t.Remaining = time.Duration(expiresMs-nowMs) * time.Millisecond
	return t
}

// acquireTx is Acquire for MySQL servers without INSERT ... RETURNING: the
// upsert (with a row alias on MySQL 8.0.19 and later), then a read of the
// row it locked, in one transaction.
func (s *store) acquireTx(ctx context.Context, name, owner string, ttl time.Duration, gotOwner *string, token, exp, nowMs, acq *int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	k := key(name)
	upsert := s.q.acquireUpsert
	if s.rowAlias {
		upsert = s.q.acquireUpsertAlias
	}
	if _, err := tx.ExecContext(ctx, upsert, k, []byte(name), owner, ttlMillis(ttl), s.host); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, s.q.acquireRead, k).Scan(gotOwner, token, exp, nowMs, acq); err != nil {
		return err
	}
	return tx.Commit()
}

// Renew implements driver.Store with one statement (q.renew). On
// PostgreSQL, Renews that arrive together, or while as many are under way
// as the pool has connections (poolLanes), share a statement: the one
// that gets a turn renews every waiting tenure with RenewBatch's
// statement, each exactly as its own statement would (internal/combine).
// On MySQL,
// which has no UPDATE ... RETURNING, the statement hands back only the new
// expiry, so the renewed Tenure's Acquired is zero and the Locker keeps
// the caller's (Renew never changes acquired_at).
func (s *store) Renew(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	if err := s.setup(ctx); err != nil {
		return driver.Tenure{}, false, err
	}
	if s.dialect == PostgreSQL {
		o, err := s.renews.Do(ctx, driver.RenewItem{Tenure: t, TTL: ttl}, s.renewAlone, s.renewShared)
		return o.Tenure, o.OK, err
	}
	return s.renewOne(ctx, t, ttl)
}

// poolLanes is the number of Renew statements, and of Release statements
// on a pool without acquire slots, under way at once on PostgreSQL
// before later ones wait and share one batch statement (renewShared,
// releaseShared): the pool's connections, so that a call never waits
// while a connection is free (internal/combine), or DefaultMaxOpenConns
// for a pool without a bound, so that a burst of thousands of renewals
// costs a few statements rather than a server connection each. A batch
// costs one commit, and one WAL flush, instead of one per call. MariaDB's
// batch renewal (JSON_TABLE) costs more than the Renews it replaces
// (0.99-1.05x the row floor down to 0.87-0.95x with 8 goroutines on one
// Locker), so MySQL and MariaDB, like SQLite, send each Renew and Release
// alone.
func poolLanes(maxOpen int) int {
	if maxOpen <= 0 {
		return DefaultMaxOpenConns
	}
	return maxOpen
}

// renewAlone is Renew's statement for one tenure, as the shared queue
// calls it.
func (s *store) renewAlone(ctx context.Context, it driver.RenewItem) (driver.RenewOutcome, error) {
	t, ok, err := s.renewOne(ctx, it.Tenure, it.TTL)
	return driver.RenewOutcome{Tenure: t, OK: ok}, err
}

// renewShared renews the tenures of waiting Renews with RenewBatch's
// statement, as the shared queue calls it.
func (s *store) renewShared(ctx context.Context, items []driver.RenewItem) ([]driver.RenewOutcome, []error) {
	out, err := s.RenewBatch(ctx, items)
	errs := make([]error, len(items))
	for i := range errs {
		if err != nil {
			errs[i] = err
		} else {
			errs[i] = out[i].Err
		}
	}
	return out, errs
}

// renewOne is Renew's statement for one tenure.
func (s *store) renewOne(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	var exp, acq int64
	ok := true
	err := retry(ctx, s.dialect, func() error {
		if s.dialect == MySQL {
			res, err := s.db.ExecContext(ctx, s.q.renew, ttlMillis(ttl), key(t.Name), t.Owner, int64(t.Token))
			if err != nil {
				return err
			}
			if exp, err = res.LastInsertId(); err != nil {
				return err
			}
			ok = exp != 0
			return nil
		}
		err := s.db.QueryRowContext(ctx, s.q.renew, key(t.Name), t.Owner, int64(t.Token), ttlMillis(ttl)).Scan(&exp, &acq)
		if errors.Is(err, sql.ErrNoRows) {
			ok, err = false, nil
		}
		return err
	})
	if err != nil {
		return driver.Tenure{}, false, s.fail(err)
	}
	if !ok {
		return driver.Tenure{}, false, nil
	}
	return tenure(t.Name, t.Owner, int64(t.Token), exp, acq), true, nil
}

// Release implements driver.Store with one statement (q.release). On a
// bounded pool it takes one of the Acquires' turns (acquireSlots). On
// PostgreSQL, Releases that arrive together, or while every turn is
// taken, share a statement (releaseShared, q.releaseBatch), as Renews do;
// the queue's lanes are then the Acquires' turns. The row
// stays, so the next tenure's token is larger, with expires_at set to
// minus the moment of release: negative, it reads as ended to every
// statement, including one whose "now" was read before it queued for the
// row's lock (a plain "now" there would still look in the future to it).
//
// A Release whose reply is lost returns the driver's error, never a
// tenure that looks lost: database/sql sends a statement again only when
// the driver says nothing was sent (driver.ErrBadConn), and retry only
// after errors that mean the database rolled it back whole.
func (s *store) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	if err := s.setup(ctx); err != nil {
		return false, err
	}
	if s.readsFirst() {
		s.held.forget(t.Name) // the next Acquire of it need not read first
	}
	if s.q.releaseBatch != "" {
		// The queue's lanes are the Acquires' turns (acquireSlots), so
		// its statements, lone or shared, each hold one.
		return s.releases.Do(ctx, t, s.releaseOne, s.releaseShared)
	}
	if slots := s.acquireSlots; slots != nil {
		// Releases take the Acquires' turns: ten thousand Runs ending
		// together must not keep the renewals of those still running
		// from a connection past their Deadlines.
		if err := s.takeSlot(ctx, "Acquires and Releases"); err != nil {
			return false, err
		}
		defer func() { <-slots }()
	}
	return s.releaseOne(ctx, t)
}

// releaseOne is Release's statement for one tenure.
func (s *store) releaseOne(ctx context.Context, t driver.Tenure) (bool, error) {
	var n int64
	err := retry(ctx, s.dialect, func() error {
		res, err := s.db.ExecContext(ctx, s.q.release, key(t.Name), t.Owner, int64(t.Token))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, s.fail(err)
	}
	return n > 0, nil
}

// Inspect implements driver.Store with one statement (q.inspect).
func (s *store) Inspect(ctx context.Context, name string) (driver.Tenure, bool, error) {
	if err := s.setup(ctx); err != nil {
		return driver.Tenure{}, false, err
	}
	var (
		owner           string
		token, exp, acq int64
	)
	err := retry(ctx, s.dialect, func() error {
		return s.db.QueryRowContext(ctx, s.q.inspect, key(name)).Scan(&owner, &token, &exp, &acq)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Tenure{}, false, nil
	}
	if err != nil {
		return driver.Tenure{}, false, s.fail(err)
	}
	return tenure(name, owner, token, exp, acq), true, nil
}

// List implements driver.Lister with one statement (q.list, q.listAll).
// It reads the whole table, so it is for operators, not hot paths.
func (s *store) List(ctx context.Context, prefix string) ([]driver.Tenure, error) {
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	var out []driver.Tenure
	err := retry(ctx, s.dialect, func() error {
		out = out[:0]
		var rows *sql.Rows
		var err error
		if prefix == "" {
			rows, err = s.db.QueryContext(ctx, s.q.listAll)
		} else {
			rows, err = s.db.QueryContext(ctx, s.q.list, len(prefix), []byte(prefix))
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name            []byte
				owner           string
				token, exp, acq int64
			)
			if err := rows.Scan(&name, &owner, &token, &exp, &acq); err != nil {
				return err
			}
			out = append(out, tenure(string(name), owner, token, exp, acq))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail(err)
	}
	return out, nil
}

// ForceRelease implements driver.ForceReleaser: it ends name's current
// tenure, whoever holds it, and returns it with Expires set to the moment
// it ended (by the database's clock). The row stays, so the next tenure's
// token is larger. One statement on SQLite and PostgreSQL; a transaction
// of two on MySQL, which has no UPDATE ... RETURNING.
func (s *store) ForceRelease(ctx context.Context, name string) (driver.Tenure, bool, error) {
	if err := s.setup(ctx); err != nil {
		return driver.Tenure{}, false, err
	}
	var (
		owner           string
		token, exp, acq int64
	)
	err := retry(ctx, s.dialect, func() error {
		if s.dialect == MySQL {
			return s.forceReleaseTx(ctx, name, &owner, &token, &exp, &acq)
		}
		var err error
		if s.dialect == PostgreSQL {
			var notified int64 // see postgresNotify
			err = s.db.QueryRowContext(ctx, s.q.forceRelease, key(name)).Scan(&owner, &token, &exp, &acq, &notified)
		} else {
			err = s.db.QueryRowContext(ctx, s.q.forceRelease, key(name)).Scan(&owner, &token, &exp, &acq)
		}
		exp = -exp // a released row's expires_at is minus the moment it ended
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Tenure{}, false, nil
	}
	if err != nil {
		return driver.Tenure{}, false, s.fail(err)
	}
	return tenure(name, owner, token, exp, acq), true, nil
}

func (s *store) forceReleaseTx(ctx context.Context, name string, owner *string, token, exp, acq *int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	k := key(name)
	if err := tx.QueryRowContext(ctx, s.q.forceSelect, k).Scan(owner, token, exp, acq); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q.forceUpdate, k, *token); err != nil {
		return err
	}
	return tx.Commit()
}

// cleanup deletes the rows whose last tenure ended more than olderThan
// ago, with one statement (q.cleanup).
func (s *store) cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	if err := s.setup(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := retry(ctx, s.dialect, func() error {
		res, err := s.db.ExecContext(ctx, s.q.cleanup, ttlMillis(olderThan))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, s.fail(err)
	}
	return n, nil
}

// acquireSlots returns the bound on concurrent Acquires for a pool of
// maxOpen connections: all but an eighth of them, and at least two, held
// back for renewals and releases; nil (no bound) for an unbounded pool or
// one too small to hold any back.
func acquireSlots(maxOpen int) chan struct{} {
	if maxOpen <= 2 {
		return nil
	}
	reserve := max(2, maxOpen/8)
	return make(chan struct{}, maxOpen-reserve)
}
