package sqllease

import (
	"context"
	"testing"
)

// Test hooks: they reach into a Locker without a field or method in the
// production types.

// forceMySQL8Path makes l, on a MariaDB server with INSERT ... RETURNING,
// take the MySQL 8 path instead (the upsert and a read in a transaction),
// so that path is tested on MariaDB too. It sets l up first, so that
// setup does not overwrite the choice; call it before l is shared.
func forceMySQL8Path(t testing.TB, l *Locker) {
	t.Helper()
	if err := l.s.setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.s.noReturning = true
}

// lookup asks the catalog about l's table.
func lookup(t testing.TB, l *Locker) catalogEntry {
	t.Helper()
	e, err := l.s.lookup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// setBatchChunk makes l's RenewBatch renew at most n distinct tenures per
// statement, so that small batches span several. Call it before l is
// shared.
func setBatchChunk(l *Locker, n int) { l.s.batchChunk = n }

// forceNoJSONTable makes l, on a MySQL-dialect server, renew batches one
// tenure at a time, as on a server without JSON_TABLE. It sets l up
// first, so that setup does not overwrite the choice; call it before l is
// shared.
func forceNoJSONTable(t testing.TB, l *Locker) {
	t.Helper()
	if err := l.s.setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.s.noJSONTable = true
}
