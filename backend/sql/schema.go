package sqllease

import (
	"fmt"
	"strings"

	"github.com/leasekit/lease"
)

// DefaultTable is the table a Locker uses unless WithTable says otherwise.
const DefaultTable = "leases"

// The table holds one row per name that was ever acquired (until Cleanup
// deletes it):
//
//	lease_key    SHA-256 of the name: the primary key, a fixed 32 bytes on
//	             every dialect, so 1024-byte names and names with NUL fit
//	name         the full name, as bytes (never truncated)
//	owner        the holder of the current or last tenure
//	token        the fencing token of the current or last tenure
//	acquired_at  when that tenure began, epoch milliseconds, database clock
//	expires_at   when it ends or ended, epoch milliseconds, database clock;
//	             a released tenure stores minus the moment of release, so
//	             that it reads as ended to every statement whatever instant
//	             that statement took as "now"
//	host         the host name of the process that began it (diagnostics)
var schemas = map[Dialect]string{
	SQLite: `CREATE TABLE IF NOT EXISTS {T} (
	lease_key   BLOB    NOT NULL PRIMARY KEY,
	name        BLOB    NOT NULL,
	owner       TEXT    NOT NULL,
	token       INTEGER NOT NULL,
	acquired_at INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	host        TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID`,
	PostgreSQL: `CREATE TABLE IF NOT EXISTS {T} (
	lease_key   BYTEA        NOT NULL PRIMARY KEY CHECK (octet_length(lease_key) = 32),
	name        BYTEA        NOT NULL,
	owner       VARCHAR(255) NOT NULL,
	token       BIGINT       NOT NULL,
	acquired_at BIGINT       NOT NULL,
	expires_at  BIGINT       NOT NULL,
	host        VARCHAR(255) NOT NULL DEFAULT ''
)`,
	// owner is VARBINARY so that comparisons are byte for byte: a
	// VARCHAR's collation would make "Worker" equal "worker " and let one
	// owner re-enter another's tenure.
	MySQL: `CREATE TABLE IF NOT EXISTS {T} (
	lease_key   BINARY(32)      NOT NULL PRIMARY KEY,
	name        VARBINARY(1024) NOT NULL,
	owner       VARBINARY(255)  NOT NULL,
	token       BIGINT          NOT NULL,
	acquired_at BIGINT          NOT NULL,
	expires_at  BIGINT          NOT NULL,
	host        VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL DEFAULT ''
) ENGINE=InnoDB`,
}

// Schema returns the CREATE TABLE IF NOT EXISTS statement for table on
// dialect d, for users who create the table in their own migrations (and
// pass WithoutAutoCreate). It is exactly what a Locker runs when it finds
// the table missing. The error matches lease.ErrInvalid for an unknown
// dialect, a table name that WithTable would reject, or a table in a
// temporary schema (SQLite's temp, PostgreSQL's pg_temp).
func Schema(d Dialect, table string) (string, error) {
	if !d.valid() {
		return "", fmt.Errorf("%w: unknown SQL dialect %v", lease.ErrInvalid, d)
	}
	if err := checkTable(table); err != nil {
		return "", err
	}
	if err := checkPermanent(d, table); err != nil {
		return "", err
	}
	return strings.ReplaceAll(schemas[d], "{T}", table), nil
}
