package sqllease

import (
	"context"
	"testing"
	"time"
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

// pretendVersion makes l, on a MariaDB server, choose its statements as
// on a server whose VERSION() is version (chooseByVersion), and send its
// row-alias upsert as rewrite turns it: MariaDB cannot parse the row
// alias, so a test of the MySQL 8.0.19+ path on MariaDB passes a rewrite
// that makes it something MariaDB runs, derived from that statement's
// text alone. The VALUES() upsert is replaced by one that fails, so that
// a test on the row-alias path cannot pass by running it. It sets l up
// first, so that setup does not overwrite the choice; call it before l
// is shared.
func pretendVersion(t testing.TB, l *Locker, version string, rewrite func(string) string) {
	t.Helper()
	if err := l.s.setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.s.chooseByVersion(version)
	l.s.q.acquireUpsertAlias = rewrite(l.s.q.acquireUpsertAlias)
	if l.s.rowAlias {
		// go-sql-driver interpolates Acquire's five arguments into the
		// comment, so the server runs the SIGNAL.
		l.s.q.acquireUpsert = `SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the VALUES() upsert ran on the row-alias path' /* ? ? ? ? ? */`
	}
}

// rowAlias reports whether l's Acquire sends the row-alias upsert.
func rowAlias(l *Locker) bool { return l.s.rowAlias }

// setHost makes l record host in the rows its Acquire writes. Call it
// before l is shared.
func setHost(l *Locker, host string) { l.s.host = host }

// setLinger makes l's stopped watches leave their watch locks on the
// listening connection for d (0: give them back at once), and at most n
// of them.
// Call it before l's first Watch.
func setLinger(l *Locker, d time.Duration, n int) { l.s.hub.SetLimits(d, n, n) }
