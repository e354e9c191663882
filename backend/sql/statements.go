package sqllease

import (
	"strconv"
	"strings"
)

// The statements live in one file per dialect: statements_sqlite.go,
// statements_postgres.go and statements_mysql.go. The takeover statement,
// Acquire's conditional upsert, is the acquire field of each (on MySQL
// built from mysqlAcquireUpsert); ops.go runs them.

// queries holds one dialect's statements for one table. Each operation is
// one statement; every "now" in it is the database's clock, read once per
// statement (see nowExpr), so the application's clock never judges expiry.
// {T} is the table, named with the schema the catalog found it in.
//
// Argument order, for the dialects with numbered parameters:
//
//	acquire      key, name, owner, ttl ms, host  -> owner, token, expires_at, now, acquired_at
//	renew        key, owner, token, ttl ms       -> expires_at, acquired_at (MySQL: LAST_INSERT_ID
//	                                                of expires_at only)
//	release      key, owner, token               -> rows affected (PostgreSQL: a row per row released)
//	inspect      key                             -> owner, token, expires_at, acquired_at
//	list         prefix length, prefix           -> name, owner, token, expires_at, acquired_at
//	forceRelease key                             -> owner, token, expires_at, acquired_at
//	                                                (PostgreSQL: and a fifth column, to ignore)
//	cleanup      age ms                          -> rows affected
//	renewBatch   batch document (batch.go)       -> see each dialect's statement
//
// The batch document of renewBatch is a JSON array with one element per
// distinct tenure, [index, "hex key", "owner", token, ttl ms], index being
// the element's position (see batchDoc).
type queries struct {
	acquire, renew, release, inspect, list, listAll, forceRelease, cleanup string

	// renewBatch renews the tenures of a batch document (batch.go).
	renewBatch string

	// releaseBatch ends the tenures of a batch document [index, key
	// (hex), owner, token] (release_shared.go); PostgreSQL only.
	releaseBatch string

	// acquireBatch is the takeover statement for many names at once
	// (acquire_batch.go): on PostgreSQL for a batch document, on MariaDB
	// with {ROWS} standing for acquireBatchRow once per name. Empty where
	// Acquires are not batched.
	acquireBatch, acquireBatchRow string

	// PostgreSQL with a marks table only (turns.go): the takeover
	// statement that also places, renews or removes the caller's mark
	// (and, fair, holds a free name back for the first in line), and the
	// removal of a mark.
	//
	//	acquireOrWait  acquire's five, waiter, mark life ms, keep, fair -> as acquire
	//	                                           (owner '' when fair waits its turn)
	//	stopWaiting    key, waiter -> a row per turn passed on
	acquireOrWait, stopWaiting string

	// MySQL only.
	acquireUpsert      string // acquire without RETURNING, for MySQL 8
	acquireUpsertAlias string // acquireUpsert with a row alias, not VALUES(), for MySQL 8.0.19+
	acquireRead        string // key -> owner, token, expires_at, now, acquired_at
	forceSelect        string // key -> owner, token, now, acquired_at (locks the row)
	forceUpdate        string // key, token -> rows affected
	renewBatchRead     string // batch document -> index, expires_at of the rows that match a tenure
}

// nowExpr is each dialect's "now" in epoch milliseconds by the database's
// clock. SQLite and MySQL fix "now" for the whole statement; PostgreSQL's
// clock_timestamp() moves within one, so its statements read it once in a
// MATERIALIZED CTE named n.
var nowExpr = map[Dialect]string{
	SQLite:     `CAST(unixepoch('subsec')*1000 AS INTEGER)`,
	PostgreSQL: `floor(extract(epoch FROM clock_timestamp())*1000)::bigint`,
	// UTC_TIMESTAMP does not depend on the session time_zone, and
	// TIMESTAMPDIFF between two DATETIMEs is plain arithmetic, so neither
	// an odd time_zone nor a DST change moves this value (unlike
	// UNIX_TIMESTAMP(NOW(3))).
	MySQL: `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`,
}

// buildQueries returns d's statements for table, and on PostgreSQL, when
// marks names its marks table, the statements that use it: releases that
// wake the waiter whose mark is first (postgresNotifyTurn), AcquireOrWait
// and StopWaiting, and a Cleanup that deletes lapsed marks too.
func buildQueries(d Dialect, table, marks string) *queries {
	var q queries
	switch d {
	case SQLite:
		q = sqliteQueries
	case PostgreSQL:
		q = postgresQueries
	case MySQL:
		q = mysqlQueries
	}
	notify := postgresNotify
	if d == PostgreSQL && marks != "" {
		notify = postgresNotifyTurn
		q.acquireOrWait, q.stopWaiting, q.cleanup = postgresAcquireOrWait, postgresStopWaiting, postgresCleanupMarks
	}
	channel, class := channelFor(table)
	r := strings.NewReplacer("{T}", table, "{NOW}", nowExpr[d], "{NOTIFY}", notify, "{TAKEOVER}", postgresTakeover, "{PASS}", postgresNotifyPass)
	// {NOTIFY}, {TAKEOVER} and {PASS} bring these in.
	r2 := strings.NewReplacer("{CHANNEL}", quoteLiteral(channel), "{CLASS}", strconv.Itoa(int(class)), "{M}", marks, "{NOW}", nowExpr[d])
	for _, s := range []*string{&q.acquire, &q.renew, &q.release, &q.inspect, &q.list, &q.listAll,
		&q.forceRelease, &q.cleanup, &q.acquireUpsert, &q.acquireUpsertAlias, &q.acquireRead, &q.forceSelect, &q.forceUpdate,
		&q.renewBatch, &q.releaseBatch, &q.renewBatchRead, &q.acquireBatch, &q.acquireBatchRow, &q.acquireOrWait, &q.stopWaiting} {
		*s = r2.Replace(r.Replace(*s))
	}
	return &q
}
