package sqllease

import (
	"crypto/sha256"
	"encoding/hex"
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

// On PostgreSQL a second table, the marks table (marksTable: the lease
// table's name with _marks), holds the marks of the Lockers waiting for a
// name (see "Waiting" in the package documentation and turns.go), one row
// per waiting Locker and name:
//
//	lease_key  the name's lease_key
//	waiter     the waiting Locker's ID (driver.Mark.Waiter)
//	placed_us  when the mark was placed, epoch microseconds, database
//	           clock: its place in line (microseconds, so that marks
//	           placed within one millisecond still keep their order)
//	lapses_at  when it lapses, epoch milliseconds, database clock
//
// Marks are deleted by the AcquireOrWait that acquires, by StopWaiting, and
// once lapsed by the next AcquireOrWait of the name and by Cleanup. Drop it
// with the lease table.
const postgresMarksSchema = `CREATE TABLE IF NOT EXISTS {M} (
	lease_key   BYTEA       NOT NULL,
	waiter      VARCHAR(64) NOT NULL,
	placed_us   BIGINT      NOT NULL,
	lapses_at   BIGINT      NOT NULL,
	PRIMARY KEY (lease_key, waiter)
)`

// marksSuffix ends the name of a lease table's marks table.
const marksSuffix = "_marks"

// marksTable names the marks table of a PostgreSQL lease table: in the
// same schema, the table's name (folded to lower case, as PostgreSQL folds
// the unquoted name) followed by _marks; a name that would pass 63 bytes,
// where PostgreSQL would cut it (perhaps to the lease table's own name),
// keeps its first 48 bytes and a hash of the rest instead.
func marksTable(table string) string {
	schema, name := splitTable(table)
	if schema != "" {
		return schema + "." + marksName(name)
	}
	return marksName(name)
}

// marksName is marksTable for an unqualified name.
func marksName(name string) string {
	name = strings.ToLower(name)
	if len(name)+len(marksSuffix) <= 63 {
		return name + marksSuffix
	}
	sum := sha256.Sum256([]byte(name))
	return name[:48] + "_" + hex.EncodeToString(sum[:4]) + marksSuffix
}

// Schema returns the CREATE TABLE IF NOT EXISTS statements for table on
// dialect d, for users who create the table in their own migrations (and
// pass WithoutAutoCreate). They are exactly what a Locker runs when it
// finds the table missing. On PostgreSQL there are two, separated by a
// semicolon and a blank line: the lease table, and its marks table
// (table_marks, in the same schema), which waiting woken by the database
// uses to wake one waiting Locker per release instead of every one; a
// database without the marks table works as before, and its waiters are
// all woken at each release. The error matches lease.ErrInvalid for an
// unknown dialect, a table name that WithTable would reject, or a table
// in a temporary schema (SQLite's temp, PostgreSQL's pg_temp).
func Schema(d Dialect, table string) (string, error) {
	stmts, err := schemaStatements(d, table)
	if err != nil {
		return "", err
	}
	return strings.Join(stmts, ";\n\n"), nil
}

// schemaStatements are Schema's statements, one by one: the lease table's
// first.
func schemaStatements(d Dialect, table string) ([]string, error) {
	if !d.valid() {
		return nil, fmt.Errorf("%w: unknown SQL dialect %v", lease.ErrInvalid, d)
	}
	if err := checkTable(table); err != nil {
		return nil, err
	}
	if err := checkPermanent(d, table); err != nil {
		return nil, err
	}
	stmts := []string{strings.ReplaceAll(schemas[d], "{T}", table)}
	if d == PostgreSQL {
		stmts = append(stmts, strings.ReplaceAll(postgresMarksSchema, "{M}", marksTable(table)))
	}
	return stmts, nil
}
