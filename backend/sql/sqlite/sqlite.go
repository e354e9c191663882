package sqlitelease

import (
	"context"
	sqldriver "database/sql/driver"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"modernc.org/sqlite"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/backend/sql/internal/sqlurl"
)

func init() { dialect.Register("sqlite") }

var dialect = sqlurl.Dialect{
	Dialect:   sqllease.SQLite,
	Params:    []string{"busy_timeout"},
	Connector: connector,
}

// Open opens a pool on the SQLite file of a sqlite: URL, creating the
// file if it is missing, and returns a Locker that owns the pool (Close
// closes it), after checking that the table exists or was created.
// Options given to Open override the URL's. A bad URL or an unknown query
// parameter is an error matching lease.ErrInvalid.
func Open(ctx context.Context, rawURL string, opts ...sqllease.Option) (*sqllease.Locker, error) {
	return dialect.OpenRaw(ctx, rawURL, opts)
}

// connector opens the file through modernc's connector, not a registered
// driver name.
func connector(u *url.URL, q url.Values) (sqldriver.Connector, error) {
	dsn, err := dsn(u, q)
	if err != nil {
		return nil, err
	}
	return sqlite.NewConnector(dsn)
}

// dsn turns sqlite:///abs/path.db or sqlite:relative.db into a
// modernc.org/sqlite DSN with WAL and a busy timeout.
func dsn(u *url.URL, q url.Values) (string, error) {
	if u.Host != "" {
		return "", fmt.Errorf("%w: sqlite URL has a host %q (want sqlite:///absolute/path.db or sqlite:relative/path.db)", lease.ErrInvalid, u.Host)
	}
	path := u.Opaque
	if path == "" {
		path = u.Path
	}
	if path == "" {
		return "", fmt.Errorf("%w: sqlite URL has no file path (want sqlite:///absolute/path.db or sqlite:relative/path.db)", lease.ErrInvalid)
	}
	if strings.Contains(path, ":memory:") || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return "", fmt.Errorf("%w: sqlite URL path %q: give a plain file path (an in-memory SQLite database is not shared between the pool's connections; use the mem:// backend instead)", lease.ErrInvalid, path)
	}
	busy := 5000
	if v := q.Get("busy_timeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return "", fmt.Errorf("%w: busy_timeout=%q is not a number of milliseconds", lease.ErrInvalid, v)
		}
		busy = n
	}
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)", path, busy), nil
}
