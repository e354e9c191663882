package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"
)

// The token-column pattern of the package documentation: each row is its
// own resource, and every write to it is a conditional UPDATE that keeps
// the largest token in the row.
//
// TestTokenColumn runs it on every dialect: a smaller token changes no
// row, an equal or larger one changes it.
func TestTokenColumn(t *testing.T) {
	allStores(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		db := s.open(t)
		reports := randomTable("reports")
		p := placeholders(s)
		mustExec(t, db, `CREATE TABLE `+reports+` (id INTEGER PRIMARY KEY, body TEXT NOT NULL, fence_token BIGINT NOT NULL DEFAULT 0)`)
		t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS ` + reports) })
		mustExec(t, db, `INSERT INTO `+reports+` (id, body) VALUES (1, '')`)

		update := `UPDATE ` + reports + ` SET body = ` + p[0] + `, fence_token = ` + p[1] + ` WHERE id = ` + p[2] + ` AND fence_token <= ` + p[3]
		write := func(db *sql.DB, body string, token int64) int64 {
			t.Helper()
			res, err := db.ExecContext(ctx, update, body, token, 1, token)
			if err != nil {
				t.Fatal(err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := write(db, "by 10", 10); n != 1 {
			t.Fatalf("first write with token 10: %d rows; want 1", n)
		}
		if n := write(db, "by 20", 20); n != 1 {
			t.Fatalf("write with token 20: %d rows; want 1", n)
		}
		if n := write(db, "by 15", 15); n != 0 {
			t.Fatalf("stale write with token 15: %d rows; want 0", n)
		}
		if n := write(db, "by 20 again", 20); n != 1 {
			t.Fatalf("write with the equal token 20: %d rows; want 1", n)
		}
		var body string
		var token int64
		if err := db.QueryRowContext(ctx, `SELECT body, fence_token FROM `+reports+` WHERE id = 1`).Scan(&body, &token); err != nil {
			t.Fatal(err)
		}
		if body != "by 20 again" || token != 20 {
			t.Fatalf("row reads %q, token %d; want \"by 20 again\", 20", body, token)
		}

		// An accepted write that changes nothing (same token, same body).
		// MySQL counts changed rows, not matched ones, unless the pool is
		// opened with clientFoundRows=true: then it reads as refused.
		n := write(db, "by 20 again", 20)
		if s.dialect.String() != "mysql" {
			if n != 1 {
				t.Fatalf("accepted write that changes nothing: %d rows; want 1", n)
			}
			return
		}
		if n != 0 {
			t.Fatalf("MySQL without clientFoundRows reported %d rows for a write that changed nothing; the documentation says 0", n)
		}
		found := &store{name: s.name, dialect: s.dialect, driver: s.driver, dsn: mysqlDSN(t, testenvMySQL(t), map[string]string{"clientFoundRows": "true"})}
		if n := write(found.open(t), "by 20 again", 20); n != 1 {
			t.Fatalf("MySQL with clientFoundRows=true: %d rows for an accepted write that changed nothing; want 1", n)
		}
	})
}

// TestTokenColumnUpsert runs the documented insert-or-update form of the
// pattern, for rows that may not exist yet.
func TestTokenColumnUpsert(t *testing.T) {
	allStores(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		db := s.open(t)
		reports := randomTable("reports")
		mustExec(t, db, `CREATE TABLE `+reports+` (id INTEGER PRIMARY KEY, body TEXT NOT NULL, fence_token BIGINT NOT NULL)`)
		t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS ` + reports) })

		var upsert string
		switch s.name {
		case "mysql":
			// Assignments run left to right, each seeing the ones before:
			// body reads fence_token before it is raised.
			upsert = `INSERT INTO ` + reports + ` (id, body, fence_token) VALUES (?, ?, LAST_INSERT_ID(?))
ON DUPLICATE KEY UPDATE
	body = IF(fence_token <= VALUES(fence_token), VALUES(body), body),
	fence_token = LAST_INSERT_ID(GREATEST(fence_token, VALUES(fence_token)))`
		case "postgresql":
			upsert = `INSERT INTO ` + reports + ` AS r (id, body, fence_token) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, fence_token = EXCLUDED.fence_token
WHERE r.fence_token <= EXCLUDED.fence_token`
		default:
			upsert = `INSERT INTO ` + reports + ` (id, body, fence_token) VALUES (?1, ?2, ?3)
ON CONFLICT (id) DO UPDATE SET body = excluded.body, fence_token = excluded.fence_token
WHERE fence_token <= excluded.fence_token`
		}
		// accepted tells the outcome: on PostgreSQL and SQLite by the rows
		// affected; on MySQL by LAST_INSERT_ID, the row's token after the
		// statement (affected rows cannot tell an equal token that changes
		// nothing from a refusal there).
		accepted := func(body string, token int64) bool {
			t.Helper()
			res, err := db.ExecContext(ctx, upsert, 7, body, token)
			if err != nil {
				t.Fatal(err)
			}
			if s.name == "mysql" {
				id, err := res.LastInsertId()
				if err != nil {
					t.Fatal(err)
				}
				return id == token
			}
			n, err := res.RowsAffected()
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
		for _, c := range []struct {
			body   string
			token  int64
			accept bool
		}{{"by 10", 10, true}, {"by 5", 5, false}, {"by 10 again", 10, true}, {"by 10 again", 10, true}, {"by 30", 30, true}, {"by 29", 29, false}} {
			if got := accepted(c.body, c.token); got != c.accept {
				t.Fatalf("upsert with token %d: accepted=%v, want %v", c.token, got, c.accept)
			}
		}
		var body string
		if err := db.QueryRowContext(ctx, `SELECT body FROM `+reports+` WHERE id = 7`).Scan(&body); err != nil || body != "by 30" {
			t.Fatalf("row reads %q (%v); want \"by 30\"", body, err)
		}
	})
}

func placeholders(s *store) []string {
	if s.name == "postgresql" {
		return []string{"$1", "$2", "$3", "$4"}
	}
	return []string{"?", "?", "?", "?"}
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
