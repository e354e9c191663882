package sqllease

import "strings"

// mysqlAcquireUpsert is the MySQL/MariaDB takeover statement: insert the
// row, or, on a duplicate key, always update it, each column choosing
// between the new tenure and the current one (VALUES(acquired_at) is this
// statement's now). MySQL assigns the columns left to right and each
// assignment sees the columns already assigned, so the columns that the
// choice reads (owner, expires_at) are assigned last. A held name's row is
// rewritten unchanged, so reading it back shows the holder: the caller won
// exactly when the owner is its own.
const mysqlAcquireUpsert = `INSERT INTO {T} (lease_key, name, owner, token, acquired_at, expires_at, host)
VALUES ` + mysqlAcquireRow + `
ON DUPLICATE KEY UPDATE
	token       = IF(expires_at <= VALUES(acquired_at), GREATEST(token + 1, VALUES(token)), token),
	acquired_at = IF(expires_at <= VALUES(acquired_at), VALUES(acquired_at), acquired_at),
	host        = IF(expires_at <= VALUES(acquired_at), VALUES(host), host),
	owner       = IF(expires_at <= VALUES(acquired_at), VALUES(owner), owner),
	expires_at  = IF(expires_at <= VALUES(acquired_at) OR owner = VALUES(owner), VALUES(expires_at), expires_at)`

// mysqlAcquireRow is the takeover statement's row of values: key, name,
// owner, ttl and host.
const mysqlAcquireRow = `(?, ?, ?, {NOW}*1000, {NOW}, {NOW} + ?, ?)`

// mysqlAcquireUpsertAlias is mysqlAcquireUpsert for MySQL 8.0.19 and
// later (store.rowAlias), which deprecate VALUES() in ON DUPLICATE KEY
// UPDATE (since 8.0.20) for a row alias: the inserted row is named new,
// and each VALUES(col) is new.col. The alias's columns have the table's
// names, so every read of the existing row is qualified with the table
// ({T}.col) and no name is left to resolve either way; the assigned
// columns on the left are the table's by definition, as in the manual's
// examples. MariaDB has no row alias and keeps mysqlAcquireUpsert. The
// two say the same thing, line for line: TestMySQLRowAliasStatement
// turns this one back into the other and requires the same text.
const mysqlAcquireUpsertAlias = `INSERT INTO {T} (lease_key, name, owner, token, acquired_at, expires_at, host)
VALUES (?, ?, ?, {NOW}*1000, {NOW}, {NOW} + ?, ?) AS new
ON DUPLICATE KEY UPDATE
	token       = IF({T}.expires_at <= new.acquired_at, GREATEST({T}.token + 1, new.token), {T}.token),
	acquired_at = IF({T}.expires_at <= new.acquired_at, new.acquired_at, {T}.acquired_at),
	host        = IF({T}.expires_at <= new.acquired_at, new.host, {T}.host),
	owner       = IF({T}.expires_at <= new.acquired_at, new.owner, {T}.owner),
	expires_at  = IF({T}.expires_at <= new.acquired_at OR {T}.owner = new.owner, new.expires_at, {T}.expires_at)`

// mysqlBatchTable is the batch document (batch.go) as a table. owner is
// at most 255 bytes, so at most 255 characters.
const mysqlBatchTable = `JSON_TABLE(?, '$[*]' COLUMNS(
	i   INT                                 PATH '$[0]',
	k   CHAR(64) CHARACTER SET ascii        PATH '$[1]',
	o   VARCHAR(255) CHARACTER SET utf8mb4  PATH '$[2]',
	tok BIGINT                              PATH '$[3]',
	ttl BIGINT                              PATH '$[4]')) AS b`

// mysqlQueries are the MySQL and MariaDB statements. Parameters are "?" in
// order of appearance, so the code passes them per statement.
var mysqlQueries = queries{
	// MariaDB 10.5+: the upsert returns the row it left, in one statement.
	acquire: mysqlAcquireUpsert + `
RETURNING owner, token, expires_at, {NOW}, acquired_at`,

	// MariaDB 10.5+: the takeover statement for many names at once
	// (acquire_batch.go), one row of values per name, in key order; each
	// row the upsert left comes back with its key.
	acquireBatch: strings.Replace(mysqlAcquireUpsert, mysqlAcquireRow, "{ROWS}", 1) + `
RETURNING lease_key, owner, token, expires_at, {NOW}, acquired_at`,
	acquireBatchRow: mysqlAcquireRow,

	// MySQL 8 has no RETURNING: the upsert, then this read of the row it
	// locked, in one transaction.
	// MySQL 8.0.19 and later run the same upsert with a row alias.
	acquireUpsert:      mysqlAcquireUpsert,
	acquireUpsertAlias: mysqlAcquireUpsertAlias,
	acquireRead:        `SELECT owner, token, expires_at, {NOW}, acquired_at FROM {T} WHERE lease_key = ?`,

	// Args: ttl ms, key, owner, token. MySQL has no UPDATE ... RETURNING:
	// LAST_INSERT_ID(expr) hands the new expiry back in the OK packet, and
	// is only evaluated (so only non-zero) when the row matched, even if
	// the expiry did not change.
	renew: `UPDATE {T} SET expires_at = LAST_INSERT_ID({NOW} + ?)
WHERE lease_key = ? AND owner = ? AND token = ? AND expires_at > {NOW}`,

	// The batch form of renew (MySQL 8.0.4+ and MariaDB 10.6+, which have
	// JSON_TABLE): every tenure of the batch document that is intact at
	// the statement's now is renewed to now + its ttl. LAST_INSERT_ID(now)
	// hands the statement's now back in the OK packet when at least one
	// row was renewed, and 0 when none was. STRAIGHT_JOIN makes the
	// document drive the join, each element looking its key up in the
	// primary key, whatever the table's statistics say.
	renewBatch: `UPDATE ` + mysqlBatchTable + ` STRAIGHT_JOIN {T} AS t
ON t.lease_key = UNHEX(b.k) AND t.owner = CAST(b.o AS BINARY) AND t.token = b.tok
SET t.expires_at = LAST_INSERT_ID({NOW}) + b.ttl
WHERE t.expires_at > {NOW}`,

	// The rows that match a tenure of the batch document, read in the
	// transaction of renewBatch after it: batch.go tells the renewed ones
	// by their expiry (renewBatch's now + ttl; a row that was not renewed
	// keeps an expiry at or before that now, and its token for good).
	renewBatchRead: `SELECT b.i, t.expires_at FROM ` + mysqlBatchTable + ` STRAIGHT_JOIN {T} AS t
ON t.lease_key = UNHEX(b.k) AND t.owner = CAST(b.o AS BINARY) AND t.token = b.tok`,

	// Args: key, owner, token. The expiry always changes (to minus now),
	// so the row counts as affected even without CLIENT_FOUND_ROWS.
	release: `UPDATE {T} SET expires_at = -{NOW}
WHERE lease_key = ? AND owner = ? AND token = ? AND expires_at > {NOW}`,

	inspect: `SELECT owner, token, expires_at, acquired_at FROM {T} WHERE lease_key = ? AND expires_at > {NOW}`,

	list: `SELECT name, owner, token, expires_at, acquired_at FROM {T}
WHERE expires_at > {NOW} AND LEFT(name, ?) = ? ORDER BY name`,

	listAll: `SELECT name, owner, token, expires_at, acquired_at FROM {T} WHERE expires_at > {NOW} ORDER BY name`,

	// ForceRelease is an operator's action, done in a transaction.
	forceSelect: `SELECT owner, token, {NOW}, acquired_at FROM {T} WHERE lease_key = ? AND expires_at > {NOW} FOR UPDATE`,
	forceUpdate: `UPDATE {T} SET expires_at = -{NOW} WHERE lease_key = ? AND token = ? AND expires_at > {NOW}`,

	cleanup: `DELETE FROM {T} WHERE abs(expires_at) <= {NOW} - ?`,
}
