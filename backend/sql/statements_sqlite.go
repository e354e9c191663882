package sqllease

// sqliteQueries are the SQLite statements. SQLite's 'now' is fixed for the
// whole statement, so {NOW} may appear several times.
var sqliteQueries = queries{
	// The takeover statement: insert the row, or, on conflict, always
	// update it, each column choosing between the new tenure and the
	// current one. A held name's row is rewritten unchanged, so RETURNING
	// shows the holder: the caller won exactly when the returned owner is
	// its own.
	acquire: `INSERT INTO {T} (lease_key, name, owner, token, acquired_at, expires_at, host)
VALUES (?1, ?2, ?3, {NOW}*1000, {NOW}, {NOW} + ?4, ?5)
ON CONFLICT (lease_key) DO UPDATE SET
	token       = CASE WHEN {T}.expires_at <= excluded.acquired_at THEN max({T}.token + 1, excluded.token) ELSE {T}.token END,
	acquired_at = CASE WHEN {T}.expires_at <= excluded.acquired_at THEN excluded.acquired_at ELSE {T}.acquired_at END,
	host        = CASE WHEN {T}.expires_at <= excluded.acquired_at THEN excluded.host ELSE {T}.host END,
	owner       = CASE WHEN {T}.expires_at <= excluded.acquired_at THEN excluded.owner ELSE {T}.owner END,
	expires_at  = CASE WHEN {T}.expires_at <= excluded.acquired_at OR {T}.owner = excluded.owner
		THEN excluded.expires_at ELSE {T}.expires_at END
RETURNING owner, token, expires_at, {NOW}, acquired_at`,

	renew: `UPDATE {T} SET expires_at = {NOW} + ?4
WHERE lease_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > {NOW}
RETURNING expires_at, acquired_at`,

	// The batch form of renew: every tenure of the batch document that
	// is intact at the statement's now is renewed to now + its ttl.
	// SQLite's RETURNING cannot name the FROM clause's tables, so the
	// row's key, owner and token come back, which name the element: at
	// most one element of a document matches a row (batch.go sends each
	// tenure once).
	renewBatch: `UPDATE {T} SET expires_at = {NOW} + b.ttl
FROM (SELECT unhex(value ->> 1) AS k, value ->> 2 AS o, value ->> 3 AS tok, value ->> 4 AS ttl FROM json_each(?1)) AS b
WHERE {T}.lease_key = b.k AND {T}.owner = b.o AND {T}.token = b.tok AND {T}.expires_at > {NOW}
RETURNING lease_key, owner, token, expires_at, acquired_at`,

	release: `UPDATE {T} SET expires_at = -{NOW}
WHERE lease_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > {NOW}`,

	inspect: `SELECT owner, token, expires_at, acquired_at FROM {T} WHERE lease_key = ?1 AND expires_at > {NOW}`,

	list: `SELECT name, owner, token, expires_at, acquired_at FROM {T}
WHERE expires_at > {NOW} AND substr(name, 1, ?1) = ?2 ORDER BY name`,

	listAll: `SELECT name, owner, token, expires_at, acquired_at FROM {T} WHERE expires_at > {NOW} ORDER BY name`,

	forceRelease: `UPDATE {T} SET expires_at = -{NOW}
WHERE lease_key = ?1 AND expires_at > {NOW}
RETURNING owner, token, expires_at, acquired_at`,

	cleanup: `DELETE FROM {T} WHERE abs(expires_at) <= {NOW} - ?1`,
}
