package postgreslease

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/internal/testenv"
)

// TestTemporaryTableRefused opens two Lockers on one URL whose table is
// in PostgreSQL's temporary schema (issue 9, defect 4): each session has
// its own, so both could acquire one name. Open must refuse the table,
// and in no case may both owners hold the name.
func TestTemporaryTableRefused(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	ctx := context.Background()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("table", "pg_temp.lease_temp_test")
	u.RawQuery = q.Encode()
	var lockers []*sqllease.Locker
	for range 2 {
		l, err := Open(ctx, u.String())
		if err != nil {
			if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "temporary") {
				t.Errorf("Open(table=pg_temp...): %v, want ErrInvalid saying the schema is temporary", err)
			}
			continue
		}
		defer l.Close()
		lockers = append(lockers, l)
	}
	if len(lockers) < 2 {
		return
	}
	t.Error("Open accepted table=pg_temp.lease_temp_test twice")
	_, err1 := lockers[0].Acquire(ctx, "job", "a", time.Minute)
	_, err2 := lockers[1].Acquire(ctx, "job", "b", time.Minute)
	if err1 == nil && err2 == nil {
		t.Error("two owners both acquired one name")
	}
}
