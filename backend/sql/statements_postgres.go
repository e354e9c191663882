package sqllease

// postgresQueries are the PostgreSQL statements. clock_timestamp() moves
// within a statement, so each statement reads it once, in the CTE n.
var postgresQueries = queries{
	// The takeover statement: insert the row, or, on conflict, always
	// update it, each column choosing between the new tenure and the
	// current one (EXCLUDED.acquired_at is this statement's now). A held
	// name's row is rewritten unchanged, so RETURNING shows the holder: the
	// caller won exactly when the returned owner is its own. Under READ
	// COMMITTED, ON CONFLICT DO UPDATE always inserts or updates, so two
	// racing inserts of a new name never fail.
	acquire: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms)
INSERT INTO {T} AS t (lease_key, name, owner, token, acquired_at, expires_at, host)
SELECT $1::bytea, $2::bytea, $3::text, n.ms*1000, n.ms, n.ms + $4::bigint, $5::text FROM n
ON CONFLICT (lease_key) DO UPDATE SET
	token       = CASE WHEN t.expires_at <= EXCLUDED.acquired_at THEN GREATEST(t.token + 1, EXCLUDED.token) ELSE t.token END,
	acquired_at = CASE WHEN t.expires_at <= EXCLUDED.acquired_at THEN EXCLUDED.acquired_at ELSE t.acquired_at END,
	host        = CASE WHEN t.expires_at <= EXCLUDED.acquired_at THEN EXCLUDED.host ELSE t.host END,
	owner       = CASE WHEN t.expires_at <= EXCLUDED.acquired_at THEN EXCLUDED.owner ELSE t.owner END,
	expires_at  = CASE WHEN t.expires_at <= EXCLUDED.acquired_at OR t.owner = EXCLUDED.owner
		THEN EXCLUDED.expires_at ELSE t.expires_at END
RETURNING t.owner, t.token, t.expires_at, (SELECT ms FROM n), t.acquired_at`,

	renew: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms)
UPDATE {T} AS t SET expires_at = n.ms + $4::bigint FROM n
WHERE t.lease_key = $1::bytea AND t.owner = $2::text AND t.token = $3::bigint AND t.expires_at > n.ms
RETURNING t.expires_at, t.acquired_at`,

	release: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms)
UPDATE {T} AS t SET expires_at = -n.ms FROM n
WHERE t.lease_key = $1::bytea AND t.owner = $2::text AND t.token = $3::bigint AND t.expires_at > n.ms`,

	inspect: `SELECT owner, token, expires_at, acquired_at FROM {T} WHERE lease_key = $1::bytea AND expires_at > {NOW}`,

	list: `SELECT name, owner, token, expires_at, acquired_at FROM {T}
WHERE expires_at > {NOW} AND substring(name FROM 1 FOR $1::int) = $2::bytea ORDER BY name`,

	listAll: `SELECT name, owner, token, expires_at, acquired_at FROM {T} WHERE expires_at > {NOW} ORDER BY name`,

	forceRelease: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms)
UPDATE {T} AS t SET expires_at = -n.ms FROM n
WHERE t.lease_key = $1::bytea AND t.expires_at > n.ms
RETURNING t.owner, t.token, t.expires_at, t.acquired_at`,

	cleanup: `DELETE FROM {T} WHERE abs(expires_at) <= {NOW} - $1::bigint`,
}
