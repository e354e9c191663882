package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"
)

// BenchmarkWrite compares one write to a row, side by side on each
// database: unguarded in autocommit, unguarded in a transaction, and
// guarded (Tx: the fence statement and the write in one transaction).
// Compare the ratios, measured in one run, with the load average.
func BenchmarkWrite(b *testing.B) {
	for _, c := range []struct {
		name string
		open func(testing.TB) *store
	}{{"sqlite", func(t testing.TB) *store { return sqliteStore(t) }}, {"postgresql", func(t testing.TB) *store { return postgresStore(t) }}, {"mysql", func(t testing.TB) *store { return mysqlStore(t) }}} {
		b.Run(c.name, func(b *testing.B) {
			s := c.open(b)
			ctx := context.Background()
			f, db := s.fence(b)
			db.SetMaxIdleConns(2)
			upsert := s.upsert()
			write := func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, upsert, "k", "v"); return err }
			b.Run("unguarded-autocommit", func(b *testing.B) {
				for b.Loop() {
					if _, err := db.ExecContext(ctx, upsert, "k", "v"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("unguarded-tx", func(b *testing.B) {
				for b.Loop() {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := write(tx); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("guarded-tx", func(b *testing.B) {
				for b.Loop() {
					if err := f.Tx(ctx, "bench", 10, write); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("check-alone", func(b *testing.B) {
				for b.Loop() {
					if err := f.Check(ctx, "bench", 10); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
