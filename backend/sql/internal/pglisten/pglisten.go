// Package pglisten is the pgx side of a PostgreSQL Locker's listening
// connection (sqllease.Listener): backend/sql/postgres's Listener, and the
// tests of backend/sql, wrap it.
package pglisten

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// closeWithin bounds closing a connection (pgx sends Terminate).
const closeWithin = time.Second

// Listener opens pgx connections from a configuration.
type Listener struct{ cfg *pgx.ConnConfig }

// New returns a Listener for a copy of cfg.
func New(cfg *pgx.ConnConfig) *Listener { return &Listener{cfg: cfg.Copy()} }

// Connect opens a connection within ctx.
func (l *Listener) Connect(ctx context.Context) (*Conn, error) {
	c, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
	if err != nil {
		return nil, err
	}
	return &Conn{c}, nil
}

// Conn is a listening connection: it has the methods of
// sqllease.ListenConn. pgx keeps a connection usable when a context ends
// a wait for a notification (it sets a deadline on the socket and keeps
// what it read), and queues notifications that come during other
// statements for the next wait.
type Conn struct{ c *pgx.Conn }

// Exec runs a statement that returns no rows.
func (c *Conn) Exec(ctx context.Context, sql string) error {
	_, err := c.c.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	return err
}

// QueryBool runs a statement that returns one boolean.
func (c *Conn) QueryBool(ctx context.Context, sql string) (bool, error) {
	var b bool
	err := c.c.QueryRow(ctx, sql, pgx.QueryExecModeSimpleProtocol).Scan(&b)
	return b, err
}

// WaitForNotification waits for the next notification until ctx ends.
func (c *Conn) WaitForNotification(ctx context.Context) (string, string, error) {
	n, err := c.c.WaitForNotification(ctx)
	if err != nil {
		return "", "", err
	}
	return n.Channel, n.Payload, nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	return c.c.Close(ctx)
}
