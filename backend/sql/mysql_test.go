package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testenv"
)

// TestMySQLPreparedStatements runs the operations on a go-sql-driver pool
// with interpolateParams off (the driver's default, so every statement is
// prepared on the server) and with clientFoundRows on: Renew's
// LAST_INSERT_ID and Release's affected-row count must read the same.
func TestMySQLPreparedStatements(t *testing.T) {
	t.Parallel()
	s := mysqlStore(t)
	for _, foundRows := range []bool{false, true} {
		cfg := mysqlConfig(t, testenv.Lookup(t, "LEASE_TEST_MYSQL"))
		cfg.InterpolateParams = false
		cfg.ClientFoundRows = foundRows
		db := sql.OpenDB(mysqlConnector(t, cfg))
		defer db.Close()
		l, err := New(db, WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		name := "prepared-" + randomTable()
		a, err := l.Acquire(ctx, name, "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// Two renewals in the same millisecond leave the row unchanged;
		// the Renew must still succeed.
		for i := 0; i < 3; i++ {
			if a, err = l.Renew(ctx, a, time.Minute); err != nil {
				t.Fatalf("clientFoundRows=%v: Renew %d: %v", foundRows, i, err)
			}
		}
		if err := l.Release(ctx, a); err != nil {
			t.Fatalf("clientFoundRows=%v: Release: %v", foundRows, err)
		}
		if _, err := l.Renew(ctx, a, time.Minute); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("clientFoundRows=%v: Renew after Release: %v, want ErrLost", foundRows, err)
		}
		if err := l.Release(ctx, a); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("clientFoundRows=%v: Release after Release: %v, want ErrLost", foundRows, err)
		}
	}
}
