package sqlfence

import "strings"

// The fence statement, one per dialect: the check and the raise in one
// upsert, which answers with the name's maximum after it. The row is
// inserted with the token if the name is new; otherwise its token becomes
// the larger of the stored one and the presented one. So the answer equals
// the presented token exactly when the write is accepted (the stored
// maximum was at most the token), and is the larger, winning token when
// it is refused, in which case the row keeps its value: a refused write
// changes nothing. The upsert locks the name's row until the transaction
// ends, so concurrent writers of one name queue behind each other and each
// sees the maximum the one before it committed.
//
// The arguments are the name's SHA-256 (32 bytes), the name's bytes and
// the token as an int64.
var fenceStatements = map[Dialect]string{
	// SQLite: RETURNING gives the row as the upsert left it. Unqualified
	// column names in DO UPDATE SET refer to the existing row.
	SQLite: `INSERT INTO {T} (fence_key, name, token) VALUES (?1, ?2, ?3)
ON CONFLICT (fence_key) DO UPDATE SET token = max(token, excluded.token)
RETURNING token`,

	PostgreSQL: `INSERT INTO {T} AS f (fence_key, name, token) VALUES ($1::bytea, $2::bytea, $3::bigint)
ON CONFLICT (fence_key) DO UPDATE SET token = GREATEST(f.token, EXCLUDED.token)
RETURNING f.token`,

	// MySQL and MariaDB: no RETURNING on every version, so the maximum
	// comes back as the statement's LAST_INSERT_ID(expr), which the server
	// puts in the OK packet (sql.Result.LastInsertId) on the insert path
	// and on the update path alike, whether or not the row changed, and
	// whatever clientFoundRows says. Affected rows would not do: an equal
	// token changes nothing and reads as 0 rows, like a refusal.
	MySQL: `INSERT INTO {T} (fence_key, name, token) VALUES (?, ?, LAST_INSERT_ID(?))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token, VALUES(token)))`,
}

func buildStatement(d Dialect, table string) string {
	return strings.ReplaceAll(fenceStatements[d], "{T}", table)
}
