package sqlurl

import "testing"

// TestNearOurs: misspellings of the Locker's parameters are caught, and
// the names of driver settings, PostgreSQL settings and MySQL system
// variables (a sample of the nearest; all 356 of PostgreSQL 15's and 675
// of MariaDB 10's pass) are not.
func TestNearOurs(t *testing.T) {
	for k, want := range map[string]string{
		"tabel": "table", "Table": "table", "tables": "table", "max_con": "max_conns",
		"maxConns": "max_conns", "max-idle-conns": "max_idle_conns", "max_idle_con": "max_idle_conns",
		"autocreat": "autocreate", "auto_create": "autocreate",
	} {
		if got, near := nearOurs(k); !near || got != want {
			t.Errorf("nearOurs(%q) = %q, %v; want %q", k, got, near, want)
		}
	}
	for _, k := range []string{
		"table", "max_conns", "role", "host", "port", "user", "dbname", "options", "sslmode",
		"search_path", "max_connections", "autocommit", "max_user_connections", "tls", "loc",
		"socket", "timeout", "charset", "collation", "maxAllowedPacket", "sql_mode", "time_zone",
	} {
		if got, near := nearOurs(k); near {
			t.Errorf("nearOurs(%q) = %q, true; want it left alone", k, got)
		}
	}
}
