package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/leasekit/lease"
)

// TestMySQLPreparedStatements runs the operations on a go-sql-driver pool
// with interpolateParams off (the driver's default, so every statement is
// prepared on the server) and with clientFoundRows on: Renew's
// LAST_INSERT_ID and Release's affected-row count must read the same.
func TestMySQLPreparedStatements(t *testing.T) {
	s := mysqlStore(t)
	for _, foundRows := range []bool{false, true} {
		u, _ := url.Parse(s.url)
		cfg, err := mysqlConfig(u, url.Values{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.InterpolateParams = false
		cfg.ClientFoundRows = foundRows
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(c)
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
