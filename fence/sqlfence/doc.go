// Package sqlfence checks fencing tokens in a SQL database, inside the
// transaction that makes the guarded write, so that the check and the
// write commit or roll back together. It works on PostgreSQL,
// MySQL/MariaDB and SQLite through database/sql, and imports no driver.
//
// # The fence table and statement
//
// The fences live in one small table (DefaultTable, "lease_fences"), one
// row per lease name: the SHA-256 of the name as the key (so 1024-byte
// names and names with NUL fit, as in the lease table), the full name,
// and the largest token accepted. New creates it after asking the
// catalog; Schema gives the DDL per dialect for your own migrations.
//
// Guard runs one statement in your transaction: an upsert that raises the
// name's maximum to the token when the token is at least the maximum, and
// answers with the maximum after it (RETURNING on PostgreSQL and SQLite,
// LAST_INSERT_ID in the OK packet on MySQL and MariaDB). Equal to the
// token: accepted. Larger: refused, with a *fence.StaleError carrying
// it, the row left as it was. The statement locks the name's row until
// the transaction ends, so writers of one name take turns, and the
// newest maximum is what each of them is held to.
//
//	f, err := sqlfence.New(ctx, db) // once; creates lease_fences if missing
//	...
//	err = f.Tx(ctx, l.Name, l.Token, func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `UPDATE reports SET body = $1 WHERE id = $2`, body, id)
//		return err
//	})
//	if errors.Is(err, fence.ErrStale) {
//		// a newer holder has written: stop
//	}
//
// Tx begins the transaction, runs Guard and fn, and commits; with a
// transaction of your own, call Guard in it. Check runs the statement on
// its own, committed at once, for fence.Middleware. GuardFunc runs it
// through a client other than database/sql, such as a pgx.Tx.
//
// The dialect is detected from the package path of the pool's driver
// (modernc.org/sqlite, mattn/go-sqlite3, jackc/pgx, lib/pq,
// go-sql-driver/mysql), or set with WithDialect. On MySQL, open the pool
// with interpolateParams=true, or go-sql-driver prepares every statement
// in a round trip of its own.
//
// # Cost
//
// A guarded write is the unguarded write plus one statement in its
// transaction, accepted or refused: on a server, one more round trip.
// TestStatementsPerWrite counts them on every dialect: BEGIN, fence
// statement, write, COMMIT is 4 round trips where the unguarded write in a
// transaction is 3 (1 in autocommit); a refusal is BEGIN, fence statement,
// ROLLBACK. Check alone is 1. The benchmarks (BenchmarkWrite) measure the
// time.
//
// # A token column on your own rows
//
// When each row is the resource (one lease per row, say a lease per
// report), the row can keep its own fence: a fence_token BIGINT column,
// and every write a conditional UPDATE.
//
//	UPDATE reports SET body = $1, fence_token = $2 WHERE id = $3 AND fence_token <= $2
//
// One row affected: accepted. None: refused (or no such row); read the
// column if you need the winning token. For a row that may not exist yet,
// on PostgreSQL and SQLite:
//
//	INSERT INTO reports AS r (id, body, fence_token) VALUES ($1, $2, $3)
//	ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, fence_token = EXCLUDED.fence_token
//	WHERE r.fence_token <= EXCLUDED.fence_token
//
// MySQL counts changed rows, not matched ones, unless the pool is opened
// with clientFoundRows=true: without it, an accepted write that changes
// nothing (same token, same values) reports 0 rows, like a refusal. Its
// insert-or-update form tells the outcome by LAST_INSERT_ID instead,
// equal to the token exactly when accepted (the assignments run left to
// right, so body reads fence_token before it is raised):
//
//	INSERT INTO reports (id, body, fence_token) VALUES (?, ?, LAST_INSERT_ID(?))
//	ON DUPLICATE KEY UPDATE
//		body = IF(fence_token <= VALUES(fence_token), VALUES(body), body),
//		fence_token = LAST_INSERT_ID(GREATEST(fence_token, VALUES(fence_token)))
//
// The column fences one row, not one name: a stale holder's write to a row
// the new holder has not written yet is accepted. Use the fence table when
// one lease guards many rows. TestTokenColumn and TestTokenColumnUpsert
// run these statements on every dialect.
//
// # From a shell
//
// Under the lease command, LEASE_NAME and LEASE_TOKEN hold the lease. With
// psql 15 or later, a script can read them with \getenv and run the
// fence statement in the write's transaction, made to fail when the token
// is stale so that psql -1 -v ON_ERROR_STOP=1 exits 3 without committing:
//
//	lease run report -- psql -X -1 -v ON_ERROR_STOP=1 -f guarded-write.sql
//
// examples/fencing/guarded-write.sql is such a script; the example's tests
// run it against PostgreSQL.
package sqlfence
