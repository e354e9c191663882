package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// The row floor: the least a durable SQL lease sends, on its own table
// (name, owner, token, expires_at in epoch ms by the database's clock):
// one upsert that takes the row only when it has expired, and one update
// fenced by name and owner (unique per tenure) and, on PostgreSQL, token.

const (
	pgNow    = `(extract(epoch FROM statement_timestamp()) * 1000)::bigint`
	mysqlNow = `CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)`
)

func createFloor(ctx context.Context, c *storeConn) error {
	ddl := `CREATE TABLE IF NOT EXISTS %s (name text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL, expires_at bigint NOT NULL)`
	if c.kind == kindMySQL {
		ddl = `CREATE TABLE IF NOT EXISTS %s (name VARCHAR(255) PRIMARY KEY, owner VARCHAR(255) NOT NULL, token BIGINT NOT NULL, expires_at BIGINT NOT NULL) ENGINE=InnoDB`
	}
	_, err := c.db.ExecContext(ctx, fmt.Sprintf(ddl, c.table("floor")))
	return err
}

// sqlImpls are the SQL store's floor and, for reference, its session
// locks.
func sqlImpls(c *storeConn, ttl time.Duration) []impl {
	return []impl{sqlFloorImpl(c, ttl), advisoryImpl(c)}
}

func sqlFloorImpl(c *storeConn, ttl time.Duration) impl {
	t := c.table("floor")
	ms := ttl.Milliseconds()
	m := impl{name: "row floor (upsert + fenced update)"}
	if c.kind == kindPostgres {
		acquire := strings.ReplaceAll(`INSERT INTO `+t+` AS t (name, owner, token, expires_at) VALUES ($1, $2, 1, NOW + $3)
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = t.token + 1, expires_at = EXCLUDED.expires_at
WHERE t.expires_at <= NOW RETURNING token`, "NOW", pgNow)
		release := strings.ReplaceAll(`UPDATE `+t+` SET expires_at = 0 WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > NOW`, "NOW", pgNow)
		renew := strings.ReplaceAll(`UPDATE `+t+` SET expires_at = NOW + $4 WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > NOW`, "NOW", pgNow)
		m.fenced = true
		m.does = map[string]string{
			"cycle": "INSERT ... ON CONFLICT DO UPDATE ... WHERE expired RETURNING token + UPDATE ... WHERE name, owner, token, unexpired",
			"renew": "UPDATE expires_at WHERE name, owner, token, unexpired",
			"busy":  "the same upsert, whose WHERE refuses (no row returned)",
		}
		m.open = func(ctx context.Context, name string) (*handle, error) {
			var owner string
			var token int64
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					o := fmt.Sprintf("%s#%d", name, tenureSeq.Add(1))
					err := c.db.QueryRowContext(ctx, acquire, name, o, ms).Scan(&token)
					if errors.Is(err, sql.ErrNoRows) {
						return 0, false, nil
					}
					owner = o
					return token, err == nil, err
				},
				release: func(ctx context.Context) error { return one(c.db.ExecContext(ctx, release, name, owner, token)) },
				renew:   func(ctx context.Context) error { return one(c.db.ExecContext(ctx, renew, name, owner, token, ms)) },
			}, nil
		}
		return m
	}
	// MySQL and MariaDB: ON DUPLICATE KEY UPDATE has no WHERE, so each
	// column chooses (expires_at last: MySQL assigns left to right), and
	// the affected-row count says whether the row was taken (1 inserted,
	// 2 updated, 0 unchanged: busy). Renew always changes the row
	// (GREATEST with expires_at+1), since MySQL counts unchanged rows as 0.
	acquire := strings.ReplaceAll(`INSERT INTO `+t+` (name, owner, token, expires_at) VALUES (?, ?, 1, NOW + ?)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= NOW, token + 1, token), owner = IF(expires_at <= NOW, VALUES(owner), owner),
expires_at = IF(expires_at <= NOW, VALUES(expires_at), expires_at)`, "NOW", mysqlNow)
	release := strings.ReplaceAll(`UPDATE `+t+` SET expires_at = 0 WHERE name = ? AND owner = ? AND expires_at > NOW`, "NOW", mysqlNow)
	renew := strings.ReplaceAll(`UPDATE `+t+` SET expires_at = GREATEST(expires_at + 1, NOW + ?) WHERE name = ? AND owner = ? AND expires_at > NOW`, "NOW", mysqlNow)
	m.does = map[string]string{
		"cycle": "INSERT ... ON DUPLICATE KEY UPDATE (each column IF expired) + UPDATE ... WHERE name, owner, unexpired",
		"renew": "UPDATE expires_at WHERE name, owner, unexpired",
		"busy":  "the same upsert, which changes nothing (0 rows affected)",
	}
	m.open = func(ctx context.Context, name string) (*handle, error) {
		var owner string
		return &handle{
			try: func(ctx context.Context) (int64, bool, error) {
				o := fmt.Sprintf("%s#%d", name, tenureSeq.Add(1))
				res, err := c.db.ExecContext(ctx, acquire, name, o, ms)
				if err != nil {
					return 0, false, err
				}
				n, err := res.RowsAffected()
				if err != nil || n == 0 {
					return 0, false, err
				}
				owner = o
				return 0, true, nil
			},
			release: func(ctx context.Context) error { return one(c.db.ExecContext(ctx, release, name, owner)) },
			renew:   func(ctx context.Context) error { return one(c.db.ExecContext(ctx, renew, ms, name, owner)) },
		}, nil
	}
	return m
}

// one checks that a fenced update changed exactly one row.
func one(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n != 1 {
		err = fmt.Errorf("fenced update changed %d rows, not 1: the tenure was lost", n)
	}
	return err
}

// advisoryImpl is the SQL store's session lock, for reference: it is not
// a lease (no expiry, no token; it lasts as long as the connection), and
// needs a connection pinned for as long as it is held. Each handle pins
// one connection of the pool for its life.
func advisoryImpl(c *storeConn) impl {
	m := impl{ref: true}
	var lock, unlock string
	key := func(name string) any { h := fnv.New64a(); h.Write([]byte(name)); return int64(h.Sum64()) }
	if c.kind == kindPostgres {
		m.name = "pg_advisory_lock (session lock, not a lease)"
		lock, unlock = `SELECT pg_try_advisory_lock($1)`, `SELECT pg_advisory_unlock($1)`
		m.does = map[string]string{
			"cycle": "SELECT pg_try_advisory_lock + SELECT pg_advisory_unlock on a pinned connection",
			"busy":  "SELECT pg_try_advisory_lock (false)",
		}
	} else {
		m.name = "GET_LOCK (session lock, not a lease)"
		lock, unlock = `SELECT GET_LOCK(?, 0)`, `SELECT RELEASE_LOCK(?)`
		key = func(name string) any {
			h := fnv.New64a()
			h.Write([]byte(name))
			return fmt.Sprintf("leasebench-%x", h.Sum64())
		}
		m.does = map[string]string{
			"cycle": "SELECT GET_LOCK(name, 0) + SELECT RELEASE_LOCK on a pinned connection",
			"busy":  "SELECT GET_LOCK(name, 0) (0)",
		}
	}
	m.open = func(ctx context.Context, name string) (*handle, error) {
		conn, err := c.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		k := key(c.id + name)
		return &handle{
			try: func(ctx context.Context) (int64, bool, error) {
				var ok bool
				err := conn.QueryRowContext(ctx, lock, k).Scan(&ok)
				return 0, ok, err
			},
			release: func(ctx context.Context) error {
				var ok bool
				if err := conn.QueryRowContext(ctx, unlock, k).Scan(&ok); err != nil {
					return err
				}
				if !ok {
					return errors.New("the session did not hold the lock")
				}
				return nil
			},
			close: func() { _ = conn.Close() },
		}, nil
	}
	return m
}
