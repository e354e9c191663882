package sqllease

import "strings"

// postgresTakeover is the conflict clause of the PostgreSQL takeover
// statements (acquire, acquireBatch): on a row that exists, take it over
// where it is free (expired), keep it and move its expiry where it is the
// caller's (re-entrant), each column choosing between the new tenure and
// the current one (EXCLUDED.acquired_at is the statement's now); leave it
// alone otherwise.
const postgresTakeover = `ON CONFLICT (lease_key) DO UPDATE SET
	token       = CASE WHEN t.expires_at <= EXCLUDED.acquired_at THEN GREATEST(t.token + 1, EXCLUDED.token) ELSE t.token END,
	acquired_at = CASE WHEN t.expires_at <= EXCLUDED.acquired_at THEN EXCLUDED.acquired_at ELSE t.acquired_at END,
	host        = CASE WHEN t.expires_at <= EXCLUDED.acquired_at THEN EXCLUDED.host ELSE t.host END,
	owner       = EXCLUDED.owner,
	expires_at  = EXCLUDED.expires_at
WHERE t.expires_at <= EXCLUDED.acquired_at OR t.owner = EXCLUDED.owner
RETURNING `

// postgresQueries are the PostgreSQL statements. clock_timestamp() moves
// within a statement, so each statement reads it once, in the CTE n.
var postgresQueries = queries{
	// The takeover statement. cur is the row as the statement's snapshot
	// shows it. When that row is held by another owner, the insert gets
	// no row to insert and the statement writes nothing (no row version,
	// no row lock, no transaction ID): it returns cur, the holder, for
	// the *lease.HeldError. Otherwise it inserts the row or, on
	// conflict, updates it only where the latest row version is free
	// (expired) or the caller's own (re-entrant: the expiry moves), each
	// column choosing between the new tenure and the current one
	// (EXCLUDED.acquired_at is this statement's now), and returns the row
	// it left. Under READ COMMITTED, ON CONFLICT DO UPDATE judges the
	// latest version, which a concurrent commit may have made after the
	// snapshot: when that version is held by another, the statement
	// returns no row (up is empty and cur, stale, is not held by another),
	// and Acquire sends it again, to a snapshot that includes the
	// commit. Two racing inserts of a new name never fail.
	acquire: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms),
cur AS MATERIALIZED (SELECT t.owner, t.token, t.expires_at, t.acquired_at FROM {T} AS t WHERE t.lease_key = $1::bytea),
up AS (
INSERT INTO {T} AS t (lease_key, name, owner, token, acquired_at, expires_at, host)
SELECT $1::bytea, $2::bytea, $3::text, n.ms*1000, n.ms, n.ms + $4::bigint, $5::text FROM n
WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.expires_at > n.ms AND cur.owner <> $3::text)
` + postgresTakeover + `t.owner, t.token, t.expires_at, t.acquired_at)
SELECT up.owner, up.token, up.expires_at, (SELECT ms FROM n), up.acquired_at FROM up
UNION ALL
SELECT cur.owner, cur.token, cur.expires_at, n.ms, cur.acquired_at FROM cur, n
WHERE cur.expires_at > n.ms AND cur.owner <> $3::text AND NOT EXISTS (SELECT 1 FROM up)`,

	// The takeover statement for many names at once (acquire_batch.go):
	// acquire's for each element of the batch document [index, key (hex),
	// name (hex), owner, ttl], whose keys are distinct, inserted in key
	// order so that batches meeting on the same rows lock them in the
	// same order. Each element's index comes back with the row the
	// statement left, or with the holder; an element with no row (its
	// row changed after the snapshot, as for acquire) is sent again alone.
	acquireBatch: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms),
b AS MATERIALIZED (SELECT (e->>0)::int AS i, decode(e->>1, 'hex') AS k, decode(e->>2, 'hex') AS nm, (e->>3) AS o, (e->>4)::bigint AS ttl
	FROM json_array_elements($1::text::json) AS e),
cur AS MATERIALIZED (SELECT b.i, t.owner, t.token, t.expires_at, t.acquired_at FROM b JOIN {T} AS t ON t.lease_key = b.k),
up AS (
INSERT INTO {T} AS t (lease_key, name, owner, token, acquired_at, expires_at, host)
SELECT b.k, b.nm, b.o, n.ms*1000, n.ms, n.ms + b.ttl, $2::text FROM b, n
WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.i = b.i AND cur.expires_at > n.ms AND cur.owner <> b.o)
ORDER BY b.k
` + postgresTakeover + `t.lease_key, t.owner, t.token, t.expires_at, t.acquired_at)
SELECT b.i, up.owner, up.token, up.expires_at, (SELECT ms FROM n), up.acquired_at FROM up JOIN b ON b.k = up.lease_key
UNION ALL
SELECT cur.i, cur.owner, cur.token, cur.expires_at, n.ms, cur.acquired_at FROM cur JOIN b ON b.i = cur.i CROSS JOIN n
WHERE cur.expires_at > n.ms AND cur.owner <> b.o AND NOT EXISTS (SELECT 1 FROM up WHERE up.lease_key = b.k)`,

	renew: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms)
UPDATE {T} AS t SET expires_at = n.ms + $4::bigint FROM n
WHERE t.lease_key = $1::bytea AND t.owner = $2::text AND t.token = $3::bigint AND t.expires_at > n.ms
RETURNING t.expires_at, t.acquired_at`,

	// The batch form of renew: every tenure of the batch document that
	// is intact at the statement's one now (n) is renewed to now + its
	// ttl, and its element's index comes back with the row. The document
	// is JSON rather than arrays so that any driver can pass it as text
	// (lib/pq cannot bind a Go slice). The planner looks each element's
	// key up in the primary key.
	renewBatch: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms)
UPDATE {T} AS t SET expires_at = n.ms + (b.e->>4)::bigint
FROM n, json_array_elements($1::text::json) AS b(e)
WHERE t.lease_key = decode(b.e->>1, 'hex') AND t.owner = (b.e->>2) AND t.token = (b.e->>3)::bigint AND t.expires_at > n.ms
RETURNING (b.e->>0)::int, t.expires_at, t.acquired_at`,

	// The release statement ends the tenure and, when some Locker is
	// watching the name (see {NOTIFY} and listen.go), announces it with
	// NOTIFY. One row comes back per row released.
	release: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms),
r AS (UPDATE {T} AS t SET expires_at = -n.ms FROM n
WHERE t.lease_key = $1::bytea AND t.owner = $2::text AND t.token = $3::bigint AND t.expires_at > n.ms
RETURNING t.lease_key)
SELECT {NOTIFY} FROM r`,

	// The batch form of release (release_shared.go): every tenure of the
	// batch document [index, key (hex), owner, token] that is intact at
	// the statement's one now is ended as release ends it, in key order
	// (the document is sorted), and its element's index comes back, with
	// the NOTIFY for the watched ones.
	releaseBatch: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms),
r AS (UPDATE {T} AS t SET expires_at = -n.ms
FROM n, json_array_elements($1::text::json) AS b(e)
WHERE t.lease_key = decode(b.e->>1, 'hex') AND t.owner = (b.e->>2) AND t.token = (b.e->>3)::bigint AND t.expires_at > n.ms
RETURNING (b.e->>0)::int AS i, t.lease_key)
SELECT r.i, {NOTIFY} FROM r`,

	inspect: `SELECT owner, token, expires_at, acquired_at FROM {T} WHERE lease_key = $1::bytea AND expires_at > {NOW}`,

	list: `SELECT name, owner, token, expires_at, acquired_at FROM {T}
WHERE expires_at > {NOW} AND substring(name FROM 1 FOR $1::int) = $2::bytea ORDER BY name`,

	listAll: `SELECT name, owner, token, expires_at, acquired_at FROM {T} WHERE expires_at > {NOW} ORDER BY name`,

	forceRelease: `WITH n AS MATERIALIZED (SELECT {NOW} AS ms),
r AS (UPDATE {T} AS t SET expires_at = -n.ms FROM n
WHERE t.lease_key = $1::bytea AND t.expires_at > n.ms
RETURNING t.lease_key, t.owner, t.token, t.expires_at, t.acquired_at)
SELECT r.owner, r.token, r.expires_at, r.acquired_at, {NOTIFY} FROM r`,

	cleanup: `DELETE FROM {T} WHERE abs(expires_at) <= {NOW} - $1::bigint`,
}

// postgresNotify is {NOTIFY} in postgresQueries: given the released row r,
// it sends NOTIFY on the table's channel ({CHANNEL}, see channelFor) with
// the row's key in hex as the payload, but only when a Locker is watching
// the name: a watching Locker's listening session holds a shared advisory
// lock on ({CLASS}, the key's first four bytes), so the statement's try
// for the same lock, exclusive, fails. NOTIFY is not free: PostgreSQL
// serializes the commits of notifying transactions (a lock held until
// after the commit's WAL flush), which halved the throughput of releases
// at 8 connections here, while the lock try costs a few percent; so a
// release that nobody waits for does not notify. The lock try, when it
// succeeds, holds the lock until the release commits. The expression's
// value (0 or 1) means nothing.
const postgresNotify = `CASE WHEN pg_try_advisory_xact_lock({CLASS}, ('x' || encode(substring(r.lease_key FROM 1 FOR 4), 'hex'))::bit(32)::int) THEN 0
ELSE (SELECT 1 FROM pg_notify({CHANNEL}, encode(r.lease_key, 'hex'))) END`

// postgresAcquireOrWait is the takeover statement of AcquireOrWait
// (turns.go): acquire's, with the caller's mark in the marks table {M}
// changed in the same statement, by data-modifying CTEs that act on what
// the takeover found. Besides acquire's five arguments it takes the
// waiter ($6), the mark's life in milliseconds ($7), keep ($8) and fair
// ($9).
//
//   - busy, the name held by another owner in the statement's snapshot
//     (acquire then writes nothing and returns the holder), or behind,
//     with fair, the name free (nobody's unexpired tenure) and the first
//     unlapsed mark in line another waiter's (the caller's own is behind
//     it, or it has none): wait. The takeover writes nothing; mk places
//     the waiter's mark, or, when it has one that has not lapsed, keeps
//     its place; either way it lapses at now + life. gc deletes the
//     name's marks that lapsed, the waiter's excepted (mk rewrites it).
//     Busy returns the holder; behind returns an empty owner, token 0,
//     and as expires_at the first mark's lapse.
//   - acquired or re-entered (up returned the row): rm deletes the
//     waiter's mark, or, with keep, mk places it anew, at the back.
//   - neither (up is empty although cur was free: a commit after the
//     snapshot, as for acquire): nothing is written and no row comes
//     back, and the statement is sent again.
//
// n reads the clock once, in milliseconds (as {NOW} would) and in
// microseconds, which order the marks (then the waiter ID, as
// postgresNotifyTurn orders them). The three writes to {M} never meet on
// a row: mk and rm have exclusive conditions, and gc spares the waiter's
// row. Without fair, behind is a one-time filter that reads no mark.
const postgresAcquireOrWait = `WITH n AS MATERIALIZED (SELECT floor(extract(epoch FROM c.at)*1000)::bigint AS ms, floor(extract(epoch FROM c.at)*1000000)::bigint AS us
	FROM (SELECT clock_timestamp() AS at) AS c),
cur AS MATERIALIZED (SELECT t.owner, t.token, t.expires_at, t.acquired_at FROM {T} AS t WHERE t.lease_key = $1::bytea),
busy AS MATERIALIZED (SELECT 1 FROM cur, n WHERE cur.expires_at > n.ms AND cur.owner <> $3::text),
behind AS MATERIALIZED (SELECT f.lapses_at FROM n, LATERAL (SELECT m.waiter, m.lapses_at FROM {M} AS m
	WHERE m.lease_key = $1::bytea AND m.lapses_at > n.ms ORDER BY m.placed_us, m.waiter LIMIT 1) AS f
	WHERE $9::boolean AND f.waiter <> $6::text AND NOT EXISTS (SELECT 1 FROM cur WHERE cur.expires_at > n.ms)),
wait AS MATERIALIZED (SELECT 1 FROM busy UNION ALL SELECT 1 FROM behind),
up AS (
INSERT INTO {T} AS t (lease_key, name, owner, token, acquired_at, expires_at, host)
SELECT $1::bytea, $2::bytea, $3::text, n.ms*1000, n.ms, n.ms + $4::bigint, $5::text FROM n
WHERE NOT EXISTS (SELECT 1 FROM wait)
{TAKEOVER}t.owner, t.token, t.expires_at, t.acquired_at),
mk AS (
INSERT INTO {M} AS m (lease_key, waiter, placed_us, lapses_at)
SELECT $1::bytea, $6::text, n.us, n.ms + $7::bigint FROM n
WHERE EXISTS (SELECT 1 FROM wait) OR ($8::boolean AND EXISTS (SELECT 1 FROM up))
ON CONFLICT (lease_key, waiter) DO UPDATE SET
	placed_us = CASE WHEN m.lapses_at <= (SELECT ms FROM n) OR NOT EXISTS (SELECT 1 FROM wait) THEN EXCLUDED.placed_us ELSE m.placed_us END,
	lapses_at = EXCLUDED.lapses_at),
rm AS (
DELETE FROM {M} AS m WHERE m.lease_key = $1::bytea AND m.waiter = $6::text AND NOT $8::boolean AND EXISTS (SELECT 1 FROM up)),
gc AS (
DELETE FROM {M} AS m USING n WHERE m.lease_key = $1::bytea AND m.waiter <> $6::text AND m.lapses_at <= n.ms AND EXISTS (SELECT 1 FROM wait))
SELECT up.owner, up.token, up.expires_at, (SELECT ms FROM n), up.acquired_at FROM up
UNION ALL
SELECT cur.owner, cur.token, cur.expires_at, n.ms, cur.acquired_at FROM cur, n
WHERE EXISTS (SELECT 1 FROM busy) AND NOT EXISTS (SELECT 1 FROM up)
UNION ALL
SELECT '', 0::bigint, behind.lapses_at, n.ms, 0::bigint FROM behind, n`

// postgresStopWaiting deletes a waiter's mark on a name. When that mark
// was live and first in line and the name is free, a release most likely
// chose this waiter, which gives up instead of acquiring: the turn passes
// on to the next mark ({PASS}), as a release would pass it, and as Redis
// and memory pass it.
const postgresStopWaiting = `WITH n AS MATERIALIZED (SELECT {NOW} AS ms),
d AS (DELETE FROM {M} WHERE lease_key = $1::bytea AND waiter = $2::text RETURNING lease_key, placed_us, lapses_at),
r AS (SELECT d.lease_key FROM d, n WHERE d.lapses_at > n.ms
	AND NOT EXISTS (SELECT 1 FROM {M} AS m WHERE m.lease_key = d.lease_key AND m.waiter <> $2::text AND m.lapses_at > n.ms
		AND (m.placed_us, m.waiter) < (d.placed_us, $2::text))
	AND NOT EXISTS (SELECT 1 FROM {T} AS t WHERE t.lease_key = d.lease_key AND t.expires_at > n.ms))
SELECT {PASS} FROM r`

// postgresNotifyPass is postgresNotifyTurn for postgresStopWaiting: the
// statement's snapshot still shows the mark it deletes, so the waiter
// named is the first other than the one that stops.
var postgresNotifyPass = strings.Replace(postgresNotifyTurn, "WHERE m.lease_key = r.lease_key AND", "WHERE m.lease_key = r.lease_key AND m.waiter <> $2::text AND", 1)

// postgresCleanupMarks is cleanup with a marks table: it also deletes
// every lapsed mark, in the same statement (the count is the lease
// rows').
const postgresCleanupMarks = `WITH g AS (DELETE FROM {M} WHERE lapses_at <= {NOW})
DELETE FROM {T} WHERE abs(expires_at) <= {NOW} - $1::bigint`

// postgresNotifyTurn is {NOTIFY} with a marks table: postgresNotify, whose
// payload, when somebody watches the name, also names the waiter whose
// unlapsed mark on it was placed first, after a space ("<key hex>
// <waiter>"), or is the key alone when there is none. The listening side
// wakes the name's plain watches at every payload, and its turn watches
// only at a payload naming their Locker or none (listen.go). Marks are read
// only when the advisory-lock try fails, and with the n of the statement.
const postgresNotifyTurn = `CASE WHEN pg_try_advisory_xact_lock({CLASS}, ('x' || encode(substring(r.lease_key FROM 1 FOR 4), 'hex'))::bit(32)::int) THEN 0
ELSE (SELECT 1 FROM pg_notify({CHANNEL}, encode(r.lease_key, 'hex') || coalesce(' ' || (SELECT m.waiter FROM {M} AS m
	WHERE m.lease_key = r.lease_key AND m.lapses_at > (SELECT ms FROM n) ORDER BY m.placed_us, m.waiter LIMIT 1), ''))) END`
