package testserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease/internal/testserver"
)

// pgConnect connects to url, closed when t ends.
func pgConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx5(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestPostgres: a private cluster takes connections with trust auth and a
// setting from the options; a committed row survives Restart and Kill;
// a connection open across a restart is broken and a new one works.
func TestPostgres(t *testing.T) {
	start := time.Now()
	pg := testserver.StartPostgres(t, &testserver.PostgresOptions{Settings: []string{"application_name=testserver"}})
	t.Logf("initdb and start in %s", time.Since(start))
	c := pgConnect(t, pg.URL())
	var name string
	if err := c.QueryRow(ctx5(t), "show application_name").Scan(&name); err != nil || name != "testserver" {
		t.Fatalf("application_name = %q, %v", name, err)
	}
	if _, err := c.Exec(ctx5(t), "create table t (n int); insert into t values (1)"); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	pg.Restart()
	t.Logf("restart (fast) in %s", time.Since(start))
	if _, err := c.Exec(ctx5(t), "select 1"); err == nil {
		t.Error("a connection opened before the restart still works")
	}
	c = pgConnect(t, pg.URL())
	if _, err := c.Exec(ctx5(t), "insert into t values (2)"); err != nil {
		t.Fatal(err)
	}

	pg.Kill()
	if refused := refused(pg.Addr()); !refused {
		t.Fatal("the port still answers after Kill")
	}
	start = time.Now()
	pg.Start()
	t.Logf("start after kill (crash recovery) in %s", time.Since(start))
	c = pgConnect(t, pg.URL())
	var n int
	if err := c.QueryRow(ctx5(t), "select count(*) from t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after Kill and Start = %d, %v; want 2", n, err)
	}
}
