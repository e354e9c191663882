package postgreslease

import (
	"context"

	"github.com/jackc/pgx/v5"

	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/backend/sql/internal/pglisten"
)

// Listener returns the sqllease.Listener that Open gives its Lockers: each
// listening connection is a pgx connection made from cfg (copied), outside
// the Locker's pool. Pass it to sqllease.New with sqllease.WithListener for
// a Locker on a pool of your own, so that its waits are woken by
// PostgreSQL (see "Waiting" in the package documentation of backend/sql).
func Listener(cfg *pgx.ConnConfig) sqllease.Listener {
	return listener{pglisten.New(cfg)}
}

type listener struct{ l *pglisten.Listener }

// Connect implements sqllease.Listener.
func (l listener) Connect(ctx context.Context) (sqllease.ListenConn, error) {
	c, err := l.l.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}
