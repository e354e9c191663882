package testserver_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease/internal/testserver"
)

// TestMariaDB: a private server takes root without a password on
// database test; a committed row survives Kill and Restart.
func TestMariaDB(t *testing.T) {
	start := time.Now()
	m := testserver.StartMariaDB(t)
	t.Logf("install and start in %s", time.Since(start))
	if m.URL() != "mysql://root@"+m.Addr()+"/test" {
		t.Errorf("URL() = %q", m.URL())
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", m.Addr(), "test"
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer func() { _ = db.Close() }()
	db.SetMaxIdleConns(0) // no connection outlives a restart
	for _, q := range []string{"create table t (n int) engine=innodb", "insert into t values (1)"} {
		if _, err := db.ExecContext(ctx5(t), q); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	m.Kill()
	m.Start()
	t.Logf("start after kill (crash recovery) in %s", time.Since(start))
	m.Restart()
	var n int
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, "select count(*) from t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after Kill, Start and Restart = %d, %v; want 1", n, err)
	}
}
