package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/leasekit/lease/fence/fencetest"
	"github.com/leasekit/lease/fence/sqlfence"
)

// target is a Fence and the data table it guards, on one pool.
type target struct {
	s  *store
	f  *sqlfence.Fence
	db *sql.DB
}

func (tg target) Check(ctx context.Context, name string, token uint64) error {
	return tg.f.Check(ctx, name, token)
}

// Write is the guarded write: the fence statement and the data write in
// one transaction.
func (tg target) Write(ctx context.Context, name string, token uint64, key, value string) error {
	return tg.f.Tx(ctx, name, token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, tg.s.upsert(), key, value)
		return err
	})
}

func (tg target) Read(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := tg.db.QueryRowContext(ctx, tg.s.read(), key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

func harness(s *store) fencetest.Harness {
	h := fencetest.Harness{
		New: func(t testing.TB) fencetest.Target {
			f, db := s.fence(t)
			return target{s: s, f: f, db: db}
		},
	}
	if s.dialect == sqlfence.SQLite {
		// The database is the file: closing every pool and opening new
		// ones is a restart. PostgreSQL and MariaDB are shared servers,
		// never restarted by tests; each Target has its own pool, so
		// "a new connection sees the maximum" covers them.
		h.Restart = func(testing.TB) { s.closeAll() }
		// Writers of one SQLite file queue for its write lock; fewer of
		// them keep the case quick on a loaded machine.
		h.Writers, h.Writes = 4, 25
	}
	return h
}

func TestFencetestSQLite(t *testing.T)   { fencetest.Run(t, harness(sqliteStore(t))) }
func TestFencetestPostgres(t *testing.T) { fencetest.Run(t, harness(postgresStore(t))) }
func TestFencetestMySQL(t *testing.T)    { fencetest.Run(t, harness(mysqlStore(t))) }
