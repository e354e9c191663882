package sqlfence

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
)

// Querier runs the fence statement: *sql.Tx (the point of it), *sql.Conn
// and *sql.DB all satisfy it. For pgx's own interface, see GuardFunc.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Guard checks a write tagged (name, token) with one statement on the
// fence table, run through q: give it the transaction that makes the
// write, before or after the write itself, and the check and the write
// commit or roll back together.
//
// It returns nil when token is accepted: the name's maximum is raised to
// token in q's transaction. When a larger token was accepted before it
// returns an error matching fence.ErrStale, a *fence.StaleError with that
// token, having changed nothing; roll the transaction back. Invalid
// arguments give an error matching lease.ErrInvalid, with nothing sent;
// a database failure gives the driver's error, wrapped.
//
//	tx, err := db.BeginTx(ctx, nil)
//	...
//	defer tx.Rollback()
//	if err := f.Guard(ctx, tx, l.Name, l.Token); err != nil {
//		return err // fence.ErrStale: a newer holder has written
//	}
//	if _, err := tx.ExecContext(ctx, `UPDATE reports SET body = $1 WHERE id = $2`, body, id); err != nil {
//		return err
//	}
//	return tx.Commit()
//
// The statement locks the name's fence row until the transaction ends, so
// writers of one name take turns; keep the transaction short. Under
// PostgreSQL's REPEATABLE READ or SERIALIZABLE, a writer that queued
// behind a newer one fails with a serialization error (SQLSTATE 40001)
// instead of ErrStale: the usual retry then sees the new maximum. On
// SQLite a transaction that reads before it writes can fail with
// SQLITE_BUSY when another writer got there first; open the pool with
// _txlock=immediate (modernc.org/sqlite) to take the write lock at BEGIN.
func (f *Fence) Guard(ctx context.Context, q Querier, name string, token uint64) error {
	if err := fence.Validate(name, token); err != nil {
		return err
	}
	key := sha256.Sum256([]byte(name))
	var max int64
	var err error
	if f.dialect == MySQL {
		var res sql.Result
		if res, err = q.ExecContext(ctx, f.stmt, key[:], []byte(name), int64(token)); err == nil {
			max, err = res.LastInsertId()
		}
	} else {
		err = q.QueryRowContext(ctx, f.stmt, key[:], []byte(name), int64(token)).Scan(&max)
	}
	if err != nil {
		return fmt.Errorf("fence/sql: check %q on %s table %s: %w", name, f.dialect, f.table, err)
	}
	return f.verdict(name, token, max)
}

// verdict reads the maximum the fence statement answered with.
func (f *Fence) verdict(name string, token uint64, max int64) error {
	switch {
	case max == int64(token):
		return nil
	case max > int64(token):
		return &fence.StaleError{Name: name, Token: token, Max: uint64(max)}
	}
	return fmt.Errorf("fence/sql: check %q on %s table %s: the statement answered with maximum %d, below the token %d it should have stored (is the token column a BIGINT?)", name, f.dialect, f.table, max, token)
}

// Check checks and raises the fence of name in a statement of its own,
// committed at once (see fence.Checker), for fence.Middleware. It is not
// atomic with any write: for that, call Guard inside the write's
// transaction, or use Tx.
func (f *Fence) Check(ctx context.Context, name string, token uint64) error {
	return f.Guard(ctx, f.db, name, token)
}

// Tx runs fn in a transaction on the Fence's pool that starts with the
// fence check of (name, token), and commits it if fn returns nil. When
// the token is stale, fn is not called and Tx returns the
// *fence.StaleError; when fn fails, the transaction is rolled back (the
// maximum too) and Tx returns fn's error. For other isolation levels or a
// transaction you already have, call Guard yourself.
func (f *Fence) Tx(ctx context.Context, name string, token uint64, fn func(tx *sql.Tx) error) (err error) {
	if err := fence.Validate(name, token); err != nil {
		return err
	}
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence/sql: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := f.Guard(ctx, tx, name, token); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence/sql: commit the write guarded by %q: %w", name, err)
	}
	return nil
}

// QueryFunc runs stmt with args in the caller's transaction and returns
// the single BIGINT of the single row it answers with.
type QueryFunc func(ctx context.Context, stmt string, args ...any) (int64, error)

// GuardFunc is Guard for a client other than database/sql, such as pgx:
// query runs the fence statement in the caller's transaction.
//
//	err := f.GuardFunc(ctx, l.Name, l.Token, func(ctx context.Context, stmt string, args ...any) (max int64, err error) {
//		err = tx.QueryRow(ctx, stmt, args...).Scan(&max) // tx is a pgx.Tx
//		return max, err
//	})
//
// The arguments are a []byte, a []byte and an int64. It works on
// PostgreSQL and SQLite, whose statement answers with a row; on MySQL it
// fails with an error matching lease.ErrInvalid (use Guard with
// database/sql there).
func (f *Fence) GuardFunc(ctx context.Context, name string, token uint64, query QueryFunc) error {
	if err := fence.Validate(name, token); err != nil {
		return err
	}
	if f.dialect == MySQL {
		return fmt.Errorf("fence/sql: %w: GuardFunc needs a statement that answers with a row, which MySQL's does not; use Guard", lease.ErrInvalid)
	}
	if query == nil {
		return fmt.Errorf("fence/sql: %w: GuardFunc with a nil QueryFunc", lease.ErrInvalid)
	}
	key := sha256.Sum256([]byte(name))
	max, err := query(ctx, f.stmt, key[:], []byte(name), int64(token))
	if err != nil {
		return fmt.Errorf("fence/sql: check %q on %s table %s: %w", name, f.dialect, f.table, err)
	}
	return f.verdict(name, token, max)
}
