package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
)

// MySQL 8.0.19 and later take Acquire's upsert with a row alias
// (mysqlAcquireUpsertAlias), MariaDB and older MySQL with VALUES()
// (mysqlAcquireUpsert). No MySQL 8 server is at hand, so the alias form
// is checked here in three ways: its text says what the VALUES() form
// says, with every read of the existing row qualified; a Locker made to
// believe it is on MySQL 8.0.36 runs it on MariaDB, turned back into
// VALUES() by unaliased (MariaDB cannot parse AS new); and the test of
// the rows it leaves catches a statement wrong in a way unaliased keeps.

// newRef matches a reference to the inserted row's column in the
// row-alias upsert.
var newRef = regexp.MustCompile(`\bnew\.(\w+)`)

// unaliased turns the row-alias upsert into a statement MariaDB runs: the
// alias goes, and each new.col becomes VALUES(col). The reads of the
// existing row stay qualified with the table, which MariaDB resolves as
// MySQL does.
func unaliased(stmt string) string {
	return newRef.ReplaceAllString(strings.Replace(stmt, " AS new\n", "\n", 1), "VALUES($1)")
}

// TestMySQLRowAliasVersions checks which servers take the row-alias form
// of the upsert: MySQL 8.0.19 and later, never MariaDB (which has no row
// alias), and not an unknown version (VALUES() still runs everywhere).
func TestMySQLRowAliasVersions(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"8.0.19":                     true,
		"8.0.20":                     true,
		"8.0.36":                     true,
		"8.0.36-0ubuntu0.22.04.1":    true,
		"8.0.40-31":                  true, // Percona Server
		"8.1.0":                      true,
		"8.4.2":                      true,
		"8.4.0-log":                  true,
		"9.1.0-commercial":           true,
		"9.0.0":                      true,
		"8.0.18":                     false,
		"8.0.4":                      false,
		"8.0.0-dmr":                  false,
		"5.7.44-log":                 false,
		"5.6.51":                     false,
		"10.11.19-MariaDB-0+deb12u1": false,
		"10.5.8-MariaDB":             false,
		"11.4.2-MariaDB":             false,
		"11.8.1-MariaDB-log":         false,
		"5.5.5-10.11.6-MariaDB":      false,
		"8.0":                        false,
		"8":                          false,
		"":                           false,
		"garbage":                    false,
		"v8.0.36":                    false,
	} {
		if got := mysqlRowAlias(v); got != want {
			t.Errorf("mysqlRowAlias(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestMySQLRowAliasChoice checks what chooseByVersion makes of a version
// together with the table: a table called new (which MySQL would not
// tell from the row alias) keeps VALUES() even on MySQL 8, and MySQL 8
// always takes the transaction, having no INSERT ... RETURNING.
func TestMySQLRowAliasChoice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version, table string
		rowAlias       bool
	}{
		{"8.0.36", "leases", true},
		{"8.0.36", "test.leases", true},
		{"8.0.36", "new", false},
		{"8.0.36", "NEW", false},
		{"8.0.36", "test.new", false},
		{"8.0.36", "renew", true},
		{"8.0.36", "new.leases", true}, // a database called new
		{"8.0.18", "leases", false},
		{"10.11.19-MariaDB", "leases", false},
	} {
		s := &store{dialect: MySQL, table: c.table}
		s.chooseByVersion(c.version)
		if s.rowAlias != c.rowAlias {
			t.Errorf("VERSION() %q, table %s: rowAlias = %v, want %v", c.version, c.table, s.rowAlias, c.rowAlias)
		}
		if s.rowAlias && !s.noReturning {
			t.Errorf("VERSION() %q: the row alias without the transaction (MySQL has no INSERT ... RETURNING)", c.version)
		}
	}
}

// upsertColumns are the columns the takeover statement inserts.
var upsertColumns = []string{"lease_key", "name", "owner", "token", "acquired_at", "expires_at", "host"}

// TestMySQLRowAliasStatement checks the MySQL 8 form of the takeover
// statement against the MariaDB one, as written and as built for a
// table in a named database: it names the inserted row new once, right
// after VALUES (...); it reads the existing row's columns only as
// {T}.col and the inserted row's only as new.col, so no column name is
// left for MySQL to resolve between the two (ER_NON_UNIQ_ERROR); and
// taking the alias out, new.col back to VALUES(col) and {T}.col back to
// col gives the MariaDB form exactly, so the two say the same thing.
func TestMySQLRowAliasStatement(t *testing.T) {
	t.Parallel()
	built := buildQueries(MySQL, "`test`.leases", "")
	for _, c := range []struct {
		what, plain, alias, table string
	}{
		{"as written", mysqlAcquireUpsert, mysqlAcquireUpsertAlias, "{T}"},
		{"built", built.acquireUpsert, built.acquireUpsertAlias, "`test`.leases"},
	} {
		plain, alias := c.plain, c.alias
		if strings.Contains(alias, "VALUES(") {
			t.Errorf("%s: the row-alias form still uses VALUES():\n%s", c.what, alias)
		}
		if n := strings.Count(alias, "?) AS new\nON DUPLICATE KEY UPDATE\n"); n != 1 || strings.Count(alias, " AS ") != 1 {
			t.Errorf("%s: the row-alias form should name the row once, after VALUES (...) and before ON DUPLICATE KEY UPDATE:\n%s", c.what, alias)
		}
		if got, want := len(newRef.FindAllString(alias, -1)), strings.Count(plain, "VALUES("); got != want || want == 0 {
			t.Errorf("%s: new.col appears %d times, VALUES(col) %d times in the MariaDB form", c.what, got, want)
		}
		back := strings.ReplaceAll(unaliased(alias), c.table+".", "")
		if back != plain {
			t.Errorf("%s: the row-alias form does not turn back into the MariaDB form:\n%s\nvs\n%s", c.what, back, plain)
		}
		checkQualified(t, c.what, alias, c.table)
	}
}

// checkQualified checks that in the ON DUPLICATE KEY UPDATE clause of
// the row-alias upsert each line assigns one of the table's columns, not
// qualified (it can only be the table's), from an expression whose every
// column is table.col or new.col.
func checkQualified(t *testing.T, what, alias, table string) {
	t.Helper()
	_, clause, ok := strings.Cut(alias, "ON DUPLICATE KEY UPDATE\n")
	if !ok {
		t.Errorf("%s: no ON DUPLICATE KEY UPDATE clause:\n%s", what, alias)
		return
	}
	cols := strings.Join(upsertColumns, "|")
	ref := regexp.MustCompile(`(` + regexp.QuoteMeta(table) + `\.|\bnew\.)?\b(` + cols + `)\b`)
	lhs := regexp.MustCompile(`^\t(` + cols + `) += (.*?),?$`)
	assigned := map[string]bool{}
	for _, line := range strings.Split(clause, "\n") {
		m := lhs.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s: the line %q does not assign a column", what, line)
			continue
		}
		if assigned[m[1]] {
			t.Errorf("%s: %s is assigned twice", what, m[1])
		}
		assigned[m[1]] = true
		refs := ref.FindAllStringSubmatch(m[2], -1)
		if len(refs) == 0 {
			t.Errorf("%s: %s is assigned from no column: %q", what, m[1], line)
		}
		for _, r := range refs {
			if r[1] == "" {
				t.Errorf("%s: %q reads %s unqualified: with the row alias, MySQL cannot tell the table's column from the inserted row's", what, line, r[2])
			}
		}
	}
	if len(assigned) != 5 {
		t.Errorf("%s: %d columns assigned, want 5 (token, acquired_at, host, owner, expires_at)", what, len(assigned))
	}
}

// TestConformanceMySQL8RowAlias runs the suite on LEASE_TEST_MYSQL with
// every Locker believing the server is MySQL 8.0.36: Acquire takes the
// MySQL 8 transaction and sends the row-alias upsert, which MariaDB runs
// turned back into VALUES() by unaliased.
func TestConformanceMySQL8RowAlias(t *testing.T) {
	s := mysqlStore(t)
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB) lease.Locker {
			l := s.newLocker(t)
			pretendVersion(t, l, "8.0.36", unaliased)
			if !rowAlias(l) {
				t.Fatal("VERSION() 8.0.36 did not choose the row-alias upsert")
			}
			return l
		},
		TTL: conformanceTTL,
	})
}

// TestMySQL8RowAliasUpsert checks, on LEASE_TEST_MYSQL, every column of
// the row the takeover statement leaves in each of its cases (upsertCases),
// through the row-alias form as MySQL 8.0.36 would get it (run by MariaDB
// through unaliased), and through the MariaDB forms this server really
// gets, with and without INSERT ... RETURNING, which must leave the same.
func TestMySQL8RowAliasUpsert(t *testing.T) {
	t.Parallel()
	s := mysqlStore(t)
	pair := func(t *testing.T, force func(*Locker)) (a, b *Locker) {
		a, b = s.newLocker(t), s.newLocker(t)
		for _, l := range []*Locker{a, b} {
			force(l)
		}
		return a, b
	}
	t.Run("row-alias", func(t *testing.T) {
		a, b := pair(t, func(l *Locker) {
			pretendVersion(t, l, "8.0.36", unaliased)
			if !rowAlias(l) {
				t.Fatal("VERSION() 8.0.36 did not choose the row-alias upsert")
			}
		})
		if err := upsertCases(context.Background(), s.db, lookup(t, a).qualified, a, b); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("mariadb-returning", func(t *testing.T) {
		a, b := pair(t, func(l *Locker) {
			if _, err := l.Inspect(context.Background(), "setup"); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatal(err)
			}
			if rowAlias(l) {
				t.Fatal("this server chose the row-alias upsert; it has no row alias if it is MariaDB")
			}
		})
		if err := upsertCases(context.Background(), s.db, lookup(t, a).qualified, a, b); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("mariadb-mysql8-path", func(t *testing.T) {
		a, b := pair(t, func(l *Locker) { forceMySQL8Path(t, l) })
		if err := upsertCases(context.Background(), s.db, lookup(t, a).qualified, a, b); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMySQL8RowAliasUpsertCatchesMistakes checks that upsertCases fails
// the row-alias statement when it is wrong in ways unaliased keeps (a
// column swapped, the existing row read for the inserted one or the other
// way around), so that the tests above would catch such a statement.
// Each mistake is written as it would be in mysqlAcquireUpsertAlias.
func TestMySQL8RowAliasUpsertCatchesMistakes(t *testing.T) {
	t.Parallel()
	s := mysqlStore(t)
	for _, m := range []struct{ old, new string }{
		// Columns swapped in what a takeover writes.
		{"new.host, {T}.host)", "new.owner, {T}.host)"},
		{"new.owner, {T}.owner)", "new.host, {T}.owner)"},
		{"new.acquired_at, {T}.acquired_at)", "new.expires_at, {T}.acquired_at)"},
		{"new.expires_at, {T}.expires_at)", "new.acquired_at, {T}.expires_at)"},
		// The inserted row read for the existing one.
		{"GREATEST({T}.token + 1", "GREATEST(new.token + 1"},
		{"new.token), {T}.token)", "new.token), new.token)"},
		{"new.acquired_at, {T}.acquired_at)", "new.acquired_at, new.acquired_at)"},
		{"new.host, {T}.host)", "new.host, new.host)"},
		{"new.owner, {T}.owner)", "new.owner, new.owner)"},
		{"OR {T}.owner = new.owner", "OR new.owner = new.owner"},
		// Conditions reading the wrong column.
		{"token       = IF({T}.expires_at <=", "token       = IF({T}.acquired_at <="},
		{"host        = IF({T}.expires_at <= new.acquired_at", "host        = IF({T}.expires_at <= new.expires_at"},
		{"OR {T}.owner = new.owner", "OR {T}.owner = new.host"},
	} {
		t.Run(m.new, func(t *testing.T) {
			if n := strings.Count(mysqlAcquireUpsertAlias, m.old); n != 1 {
				t.Fatalf("%q appears %d times in mysqlAcquireUpsertAlias, want once", m.old, n)
			}
			mistaken := strings.Replace(mysqlAcquireUpsertAlias, m.old, m.new, 1)
			if got := strings.ReplaceAll(unaliased(mistaken), "{T}.", ""); got == mysqlAcquireUpsert {
				t.Fatalf("the mistake turns back into the MariaDB form: TestMySQLRowAliasStatement cannot see it")
			}
			var a, b *Locker
			for _, l := range []**Locker{&a, &b} {
				*l = s.newLocker(t)
				pretendVersion(t, *l, "8.0.36", func(stmt string) string {
					table := lookup(t, *l).qualified
					old, new := strings.ReplaceAll(m.old, "{T}", table), strings.ReplaceAll(m.new, "{T}", table)
					if strings.Count(stmt, old) != 1 {
						t.Fatalf("%q is not once in the built statement:\n%s", old, stmt)
					}
					return unaliased(strings.Replace(stmt, old, new, 1))
				})
			}
			err := upsertCases(context.Background(), s.db, lookup(t, a).qualified, a, b)
			if err == nil {
				t.Fatalf("upsertCases passed a row-alias upsert with %q for %q", m.new, m.old)
			}
			t.Logf("caught: %v", err)
		})
	}
}

// upsertRow is a row of the table as the takeover statement leaves it.
type upsertRow struct {
	owner, host              string
	token, acquired, expires int64
}

// upsertCases acquires one name through each case of the takeover
// statement with a and b (given hosts "host-a" and "host-b"), reads the
// row back from table after each, and returns what the first case that
// left a wrong row did: a new name; the name held by another owner (row
// unchanged); re-entrant (only the expiry moves); a takeover of a
// released tenure and one of an expired tenure (every column the new
// tenure's, the token above the last).
func upsertCases(ctx context.Context, db *sql.DB, table string, a, b *Locker) error {
	setHost(a, "host-a")
	setHost(b, "host-b")
	name := "rowalias-" + randomTable()
	read := func() (upsertRow, error) {
		var r upsertRow
		err := db.QueryRowContext(ctx, "SELECT owner, host, token, acquired_at, expires_at FROM "+table+" WHERE lease_key = ?", key(name)).
			Scan(&r.owner, &r.host, &r.token, &r.acquired, &r.expires)
		return r, err
	}
	// granted checks a tenure that has just begun: the Lease's, every
	// column the new tenure's, and the token above prev's (0: none).
	granted := func(what string, got lease.Lease, owner, host string, ttl time.Duration, prev int64) (upsertRow, error) {
		r, err := read()
		if err != nil {
			return r, fmt.Errorf("%s: %w", what, err)
		}
		want := upsertRow{owner: owner, host: host, token: max(prev+1, r.acquired*1000), acquired: got.Acquired.UnixMilli()}
		want.expires = want.acquired + ttl.Milliseconds()
		if r != want || got.Token != uint64(r.token) || got.Owner != owner {
			return r, fmt.Errorf("%s: row %+v, Lease %v, want row %+v", what, r, got, want)
		}
		return r, nil
	}

	la, err := a.Acquire(ctx, name, "a", time.Minute)
	if err != nil {
		return fmt.Errorf("new name: %w", err)
	}
	first, err := granted("new name", la, "a", "host-a", time.Minute, 0)
	if err != nil {
		return err
	}

	if _, err := b.Acquire(ctx, name, "b", 2*time.Minute); !errors.Is(err, lease.ErrHeld) {
		return fmt.Errorf("held by another owner: Acquire: %v, want ErrHeld", err)
	}
	if r, err := read(); err != nil || r != first {
		return fmt.Errorf("held by another owner: row %+v (%v), want it unchanged, %+v", r, err, first)
	}

	la, err = a.Acquire(ctx, name, "a", 2*time.Minute)
	if err != nil {
		return fmt.Errorf("re-entrant: %w", err)
	}
	again, err := read()
	if err != nil {
		return fmt.Errorf("re-entrant: %w", err)
	}
	want := first
	want.expires = again.expires
	if again != want || again.expires <= first.expires || again.expires-2*time.Minute.Milliseconds() < first.acquired ||
		la.Token != uint64(first.token) || !la.Expires.Equal(time.UnixMilli(again.expires)) {
		return fmt.Errorf("re-entrant: row %+v, Lease %v, want %+v with the expiry moved on by the new ttl", again, la, first)
	}

	if err := a.Release(ctx, la); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	lb, err := b.Acquire(ctx, name, "b", time.Minute)
	if err != nil {
		return fmt.Errorf("after release: %w", err)
	}
	taken, err := granted("after release", lb, "b", "host-b", time.Minute, again.token)
	if err != nil {
		return err
	}

	// b renews its tenure to a few milliseconds, which then pass.
	if _, err := b.Acquire(ctx, name, "b", 10*time.Millisecond); err != nil {
		return fmt.Errorf("short re-entrant: %w", err)
	}
	for i := 0; ; i++ {
		time.Sleep(20 * time.Millisecond)
		la, err = a.Acquire(ctx, name, "a", time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, lease.ErrHeld) || i == 50 {
			return fmt.Errorf("after expiry: %w", err)
		}
	}
	_, err = granted("after expiry", la, "a", "host-a", time.Minute, taken.token)
	return err
}
