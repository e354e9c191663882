package sqlfence

import (
	"fmt"
	"strings"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/sqlcatalog"
)

// DefaultTable is the fence table of a Fence made without WithTable.
const DefaultTable = "lease_fences"

// The fence table holds one row per lease name that ever had a write
// accepted on this database:
//
//	fence_key  SHA-256 of the name: the primary key, a fixed 32 bytes on
//	           every dialect, so 1024-byte names and names with NUL fit
//	name       the full name, as bytes, for the operator's eye
//	token      the largest token accepted for the name
//
// Rows are never deleted by this package: a deleted row would let any old
// token through again. One row is about 100 bytes plus the name.
var schemas = map[Dialect]string{
	SQLite: `CREATE TABLE IF NOT EXISTS {T} (
	fence_key BLOB    NOT NULL PRIMARY KEY,
	name      BLOB    NOT NULL,
	token     INTEGER NOT NULL
) WITHOUT ROWID`,
	PostgreSQL: `CREATE TABLE IF NOT EXISTS {T} (
	fence_key BYTEA  NOT NULL PRIMARY KEY CHECK (octet_length(fence_key) = 32),
	name      BYTEA  NOT NULL,
	token     BIGINT NOT NULL
)`,
	MySQL: `CREATE TABLE IF NOT EXISTS {T} (
	fence_key BINARY(32)      NOT NULL PRIMARY KEY,
	name      VARBINARY(1024) NOT NULL,
	token     BIGINT          NOT NULL
) ENGINE=InnoDB`,
}

// Schema returns the CREATE TABLE IF NOT EXISTS statement of the fence
// table named table on dialect d, for users who create it in their own
// migrations (and pass WithoutAutoCreate). It is exactly what New runs
// when it finds the table missing. The error matches lease.ErrInvalid for
// an unknown dialect or a table name that WithTable would reject.
func Schema(d Dialect, table string) (string, error) {
	if !d.valid() {
		return "", fmt.Errorf("fence/sql: %w: unknown SQL dialect %v", lease.ErrInvalid, d)
	}
	if err := sqlcatalog.CheckTable(table); err != nil {
		return "", fmt.Errorf("fence/sql: %w", err)
	}
	return strings.ReplaceAll(schemas[d], "{T}", table), nil
}
