package sqllease

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
)

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

// Acquire implements lease.Locker with one statement (the takeover
// statement in statements_*.go), except on MySQL 8 (see the package
// documentation).
func (l *Locker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckAcquire(name, owner, ttl); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.wrap("acquire", name, err)
	}
	start := time.Now()
	var (
		gotOwner          string
		token, exp, nowMs int64
	)
	err := retry(ctx, func() error {
		if l.dialect == MySQL && l.noReturning {
			return l.acquireTx(ctx, name, owner, ttl, &gotOwner, &token, &exp, &nowMs)
		}
		return l.db.QueryRowContext(ctx, l.q.acquire, key(name), []byte(name), owner, ttlMillis(ttl), l.host).
			Scan(&gotOwner, &token, &exp, &nowMs)
	})
	if err != nil {
		return lease.Lease{}, l.wrap("acquire", name, err)
	}
	if gotOwner != owner {
		return lease.Lease{}, &lease.HeldError{Name: name, Owner: gotOwner, Remaining: time.Duration(exp-nowMs) * time.Millisecond}
	}
	return lease.Lease{
		Name:     name,
		Owner:    owner,
		Token:    uint64(token),
		Expires:  time.UnixMilli(exp),
		Deadline: lease.DeadlineFrom(start, ttl),
	}, nil
}

// acquireTx is Acquire for MySQL servers without INSERT ... RETURNING: the
// upsert, then a read of the row it locked, in one transaction.
func (l *Locker) acquireTx(ctx context.Context, name, owner string, ttl time.Duration, gotOwner *string, token, exp, nowMs *int64) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	k := key(name)
	if _, err := tx.ExecContext(ctx, l.q.acquireUpsert, k, []byte(name), owner, ttlMillis(ttl), l.host); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, l.q.acquireRead, k).Scan(gotOwner, token, exp, nowMs); err != nil {
		return err
	}
	return tx.Commit()
}

// Renew implements lease.Locker with one statement.
func (l *Locker) Renew(ctx context.Context, ls lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckRenew(ls, ttl); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.wrap("renew", ls.Name, err)
	}
	start := time.Now()
	var exp int64
	lost := false
	err := retry(ctx, func() error {
		if l.dialect == MySQL {
			res, err := l.db.ExecContext(ctx, l.q.renew, ttlMillis(ttl), key(ls.Name), ls.Owner, int64(ls.Token))
			if err != nil {
				return err
			}
			if exp, err = res.LastInsertId(); err != nil {
				return err
			}
			lost = exp == 0
			return nil
		}
		err := l.db.QueryRowContext(ctx, l.q.renew, key(ls.Name), ls.Owner, int64(ls.Token), ttlMillis(ttl)).Scan(&exp)
		if errors.Is(err, sql.ErrNoRows) {
			lost, err = true, nil
		}
		return err
	})
	if err != nil {
		return lease.Lease{}, l.wrap("renew", ls.Name, err)
	}
	if lost {
		return lease.Lease{}, fmt.Errorf("lease/sql: renew %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	ls.Expires = time.UnixMilli(exp)
	ls.Deadline = lease.DeadlineFrom(start, ttl)
	return ls, nil
}

// Release implements lease.Locker with one statement. The row stays, so
// the next tenure's token is larger, with expires_at set to minus the
// moment of release: negative, it reads as ended to every statement,
// including one whose "now" was read before it queued for the row's lock
// (a plain "now" there would still look in the future to it).
func (l *Locker) Release(ctx context.Context, ls lease.Lease) error {
	if err := lease.CheckLease(ls); err != nil {
		return err
	}
	if err := l.begin(ctx); err != nil {
		return l.wrap("release", ls.Name, err)
	}
	var n int64
	err := retry(ctx, func() error {
		res, err := l.db.ExecContext(ctx, l.q.release, key(ls.Name), ls.Owner, int64(ls.Token))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return l.wrap("release", ls.Name, err)
	}
	if n == 0 {
		return fmt.Errorf("lease/sql: release %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	return nil
}

// Inspect implements lease.Locker with one statement.
func (l *Locker) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.wrap("inspect", name, err)
	}
	var (
		owner      string
		token, exp int64
	)
	err := retry(ctx, func() error {
		return l.db.QueryRowContext(ctx, l.q.inspect, key(name)).Scan(&owner, &token, &exp)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Lease{}, fmt.Errorf("lease/sql: inspect %q: %w", name, lease.ErrNotHeld)
	}
	if err != nil {
		return lease.Lease{}, l.wrap("inspect", name, err)
	}
	return lease.Lease{Name: name, Owner: owner, Token: uint64(token), Expires: time.UnixMilli(exp)}, nil
}

// List implements lease.Lister with one statement: the unexpired tenures
// whose names start with prefix, sorted by name (byte order). It reads the
// whole table, so it is for operators, not hot paths.
func (l *Locker) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	if err := l.begin(ctx); err != nil {
		return nil, l.wrap("list", prefix, err)
	}
	var out []lease.Lease
	err := retry(ctx, func() error {
		out = out[:0]
		var rows *sql.Rows
		var err error
		if prefix == "" {
			rows, err = l.db.QueryContext(ctx, l.q.listAll)
		} else {
			rows, err = l.db.QueryContext(ctx, l.q.list, len(prefix), []byte(prefix))
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name       []byte
				owner      string
				token, exp int64
			)
			if err := rows.Scan(&name, &owner, &token, &exp); err != nil {
				return err
			}
			out = append(out, lease.Lease{Name: string(name), Owner: owner, Token: uint64(token), Expires: time.UnixMilli(exp)})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, l.wrap("list", prefix, err)
	}
	return out, nil
}

// ForceRelease implements lease.ForceReleaser: it ends name's current
// tenure, whoever holds it, and returns it with Expires set to the moment
// it ended (by the database's clock). The row stays, so the next tenure's
// token is larger. One statement on SQLite and PostgreSQL; a transaction
// of two on MySQL, which has no UPDATE ... RETURNING.
func (l *Locker) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.wrap("force release", name, err)
	}
	var (
		owner      string
		token, exp int64
	)
	err := retry(ctx, func() error {
		if l.dialect == MySQL {
			return l.forceReleaseTx(ctx, name, &owner, &token, &exp)
		}
		err := l.db.QueryRowContext(ctx, l.q.forceRelease, key(name)).Scan(&owner, &token, &exp)
		exp = -exp // a released row's expires_at is minus the moment it ended
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Lease{}, fmt.Errorf("lease/sql: force release %q: %w", name, lease.ErrNotHeld)
	}
	if err != nil {
		return lease.Lease{}, l.wrap("force release", name, err)
	}
	return lease.Lease{Name: name, Owner: owner, Token: uint64(token), Expires: time.UnixMilli(exp)}, nil
}

func (l *Locker) forceReleaseTx(ctx context.Context, name string, owner *string, token, exp *int64) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	k := key(name)
	if err := tx.QueryRowContext(ctx, l.q.forceSelect, k).Scan(owner, token, exp); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, l.q.forceUpdate, k, *token); err != nil {
		return err
	}
	return tx.Commit()
}

// MinCleanupAge is the shortest age Cleanup accepts.
const MinCleanupAge = time.Minute

// Cleanup deletes the rows of names whose last tenure ended (expired,
// or was released) more than olderThan ago by the database's clock, and
// returns how many it deleted. Use it when many short-lived names would
// otherwise leave a row each.
//
// Tokens stay in order across a deletion: a new row's first token is the
// database's time in milliseconds times 1000, and every later token at
// least that, so a name's next token exceeds its deleted row's last one
// unless that row saw over 1000 tenures per millisecond on average, or the
// database's clock stepped back by more than olderThan. olderThan must be
// at least MinCleanupAge; an hour or a day is a sensible choice.
func (l *Locker) Cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < MinCleanupAge {
		return 0, fmt.Errorf("%w: lease/sql: cleanup age %s is shorter than the minimum of %s", lease.ErrInvalid, olderThan, MinCleanupAge)
	}
	return l.cleanup(ctx, olderThan)
}

func (l *Locker) cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	if err := l.begin(ctx); err != nil {
		return 0, l.wrap("cleanup", l.table, err)
	}
	var n int64
	err := retry(ctx, func() error {
		res, err := l.db.ExecContext(ctx, l.q.cleanup, ttlMillis(olderThan))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, l.wrap("cleanup", l.table, err)
	}
	return n, nil
}
