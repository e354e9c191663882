package sqllease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestSchemaQualifiedTable runs every operation on a table named with its
// schema (main. on SQLite, public. on PostgreSQL, the database on MySQL).
func TestSchemaQualifiedTable(t *testing.T) {
	t.Parallel()
	allStores(t, func(t *testing.T, s *testStore) {
		schema := map[Dialect]string{SQLite: "main", PostgreSQL: "public", MySQL: "test"}[s.dialect]
		table := schema + "." + randomTable()
		t.Cleanup(func() { dropTable(s.db, s.dialect, table) })
		l, err := New(s.db, WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, err := l.Acquire(ctx, "q", "a", time.Minute)
		if err != nil {
			t.Fatalf("Acquire on %s: %v", table, err)
		}
		if _, err := l.Acquire(ctx, "q", "b", time.Minute); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("second owner: %v", err)
		}
		if a, err = l.Renew(ctx, a, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, err := l.List(ctx, ""); err != nil || len(got) != 1 {
			t.Fatalf("List: %v, %v", got, err)
		}
		if err := l.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		b, err := l.Acquire(ctx, "q", "b", time.Minute)
		if err != nil || b.Token <= a.Token {
			t.Fatalf("Acquire after release: %v, %v", b, err)
		}
		if _, err := l.ForceRelease(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		// A second Locker finds the table in the catalog.
		l2, _ := New(s.db, WithTable(table), WithoutAutoCreate())
		if _, err := l2.Inspect(ctx, "q"); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Inspect through a second Locker: %v", err)
		}
	})
}
