package sqlcatalog_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"
	"modernc.org/sqlite"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/sqlcatalog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type otherDriver struct{}

func (otherDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no") }

func TestFlavourOf(t *testing.T) {
	for _, c := range []struct {
		drv  driver.Driver
		want sqlcatalog.Flavour
	}{
		{&sqlite.Driver{}, sqlcatalog.SQLite},
		{&stdlib.Driver{}, sqlcatalog.PostgreSQL},
		{&mysql.MySQLDriver{}, sqlcatalog.MySQL},
		{mysql.MySQLDriver{}, sqlcatalog.MySQL},
		{otherDriver{}, sqlcatalog.Unknown},
		{nil, sqlcatalog.Unknown},
	} {
		if got, pkg := sqlcatalog.FlavourOf(c.drv); got != c.want {
			t.Errorf("FlavourOf(%T) = %v (package %q), want %v", c.drv, got, pkg, c.want)
		}
	}
}

func TestCheckTable(t *testing.T) {
	for _, ok := range []string{"t", "_t1", "app.lease_fences", "A_b"} {
		if err := sqlcatalog.CheckTable(ok); err != nil {
			t.Errorf("CheckTable(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1t", "a-b", "a.b.c", "t;", "t t", `"t"`} {
		if err := sqlcatalog.CheckTable(bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("CheckTable(%q): %v; want ErrInvalid", bad, err)
		}
	}
}

func TestTableExistsSQLite(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if ok, err := sqlcatalog.TableExists(ctx, db, sqlcatalog.SQLite, "t"); ok || err != nil {
		t.Fatalf("before CREATE: %v %v", ok, err)
	}
	if _, err := db.Exec("CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	if ok, err := sqlcatalog.TableExists(ctx, db, sqlcatalog.SQLite, "main.T"); !ok || err != nil {
		t.Fatalf("after CREATE: %v %v", ok, err)
	}
	if _, err := sqlcatalog.TableExists(ctx, db, sqlcatalog.Unknown, "t"); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("unknown flavour: %v", err)
	}
}
