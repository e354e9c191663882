-- guarded-write.sql: a write to PostgreSQL guarded by the fencing token of
-- the lease it runs under, for psql 15 or later under the lease command:
--
--   lease run report -- psql -X -1 -v ON_ERROR_STOP=1 -f guarded-write.sql
--
-- lease run passes LEASE_NAME and LEASE_TOKEN; \getenv reads them. The
-- first statement is sqlfence's fence statement on its table lease_fences
-- (made by sqlfence.New, or by the DDL of sqlfence.Schema): it raises the
-- name's maximum to the token, or, when a larger token was accepted
-- before, fails, by casting its message to an integer. -1 runs the file in
-- one transaction and ON_ERROR_STOP stops at the error, so the write below
-- is rolled back with it and psql exits 3.

\getenv name LEASE_NAME
\getenv token LEASE_TOKEN

WITH f AS (
	INSERT INTO lease_fences AS f (fence_key, name, token)
	VALUES (sha256(convert_to(:'name', 'UTF8')), convert_to(:'name', 'UTF8'), :'token'::bigint)
	ON CONFLICT (fence_key) DO UPDATE SET token = GREATEST(f.token, EXCLUDED.token)
	RETURNING f.token
)
SELECT CASE WHEN token = :'token'::bigint THEN 'accepted'
	ELSE ('stale lease token ' || :'token' || ' for ' || :'name' || ': token ' || token || ' was accepted')::int::text
	END AS fence
FROM f;

-- The guarded write: anything, in the same transaction.
INSERT INTO reports (id, body) VALUES (1, 'written under token ' || :'token')
ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body;
