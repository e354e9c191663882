package sqlitelease

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
)

// TestTemporaryTableRefused opens two Lockers on one URL whose table is
// in SQLite's temp schema (issue 9, defect 4). Each pooled connection has
// its own temp schema, so both Lockers could acquire one name: Open must
// refuse the table, and in no case may both owners hold the name.
func TestTemporaryTableRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lease.db")
	for _, table := range []string{"temp.leases", "TEMP.leases", "Temp.x"} {
		u := "sqlite://" + path + "?table=" + table
		var lockers []*sqllease.Locker
		for range 2 {
			l, err := Open(ctx, u)
			if err != nil {
				if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "temp") {
					t.Errorf("Open(%s): %v, want ErrInvalid naming the temp schema", u, err)
				}
				continue
			}
			defer l.Close()
			lockers = append(lockers, l)
		}
		if len(lockers) < 2 {
			continue
		}
		t.Errorf("Open accepted table=%s twice", table)
		_, err1 := lockers[0].Acquire(ctx, "job", "a", time.Minute)
		_, err2 := lockers[1].Acquire(ctx, "job", "b", time.Minute)
		if err1 == nil && err2 == nil {
			t.Errorf("table=%s: two owners both acquired one name", table)
		}
	}
}
