package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	sqllease "github.com/leasekit/lease/backend/sql"
)

// sqlDialects are the URL schemes of the SQL stores.
var sqlDialects = map[string]sqllease.Dialect{
	"sqlite":     sqllease.SQLite,
	"postgres":   sqllease.PostgreSQL,
	"postgresql": sqllease.PostgreSQL,
	"mysql":      sqllease.MySQL,
}

// storeURL is the URL argument of schema and cleanup, else the --backend
// store, parsed.
func (g *globals) storeURL(cmd string, fs *flagSet) (*url.URL, error) {
	if fs.NArg() > 1 {
		return nil, usageErrorf("%s takes at most one URL, got %d arguments", cmd, fs.NArg())
	}
	raw := fs.Arg(0)
	if raw == "" {
		var err error
		if raw, err = g.backendURL(); err != nil {
			return nil, err
		}
	}
	g.backend = raw // for open and for messages
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, usageErrorf("%s: %s is not a backend URL (want e.g. postgres://user@host/db or sqlite:///path/lease.db)", cmd, g.storeName())
	}
	return u, nil
}

// schema is "lease schema [URL]".
func (g *globals) schema(args []string) error {
	fs := g.flags("schema", `schema [URL]

Prints the CREATE TABLE statement of the SQL store at URL (default: the
--backend store) for its dialect and its ?table= (default "leases"), and
for PostgreSQL also that of the waiters' marks table (<table>_marks), to
create the table in your own migrations and open the store with
?autocreate=false. It does not connect to the store. Other stores keep no
table: for them it exits 2.`)
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	u, err := g.storeURL("schema", fs)
	if err != nil {
		return err
	}
	d, ok := sqlDialects[strings.ToLower(u.Scheme)]
	if !ok {
		return usageErrorf("schema: %s:// stores keep no table, so there is no schema to create (schema is for sqlite, postgres and mysql URLs)", u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return usageErrorf("schema: the query of %s: %v", g.storeName(), err)
	}
	table := sqllease.DefaultTable
	if t := q.Get("table"); t != "" {
		table = t
	}
	ddl, err := sqllease.Schema(d, table)
	if err != nil {
		return usageErrorf("schema: %v", err)
	}
	fmt.Fprintf(g.stdout, "%s;\n", ddl)
	return nil
}

// cleaner is a store that can delete the rows of ended leases
// (sqllease.Locker).
type cleaner interface {
	Cleanup(ctx context.Context, olderThan time.Duration) (int64, error)
}

// cleanup is "lease cleanup [--older-than D] [URL]".
func (g *globals) cleanup(ctx context.Context, args []string) (err error) {
	fs := g.flags("cleanup", `cleanup [--older-than D] [URL]

Deletes the rows that a SQL store at URL (default: the --backend store)
keeps for names whose last lease ended more than --older-than ago, and says
how many. A SQL store keeps a row per name ever used, so that its tokens
keep growing; run this when many short-lived names pile up. Tokens stay in
order across a cleanup. Redis, etcd and memory stores delete what expires
on their own: for them lease says there is nothing to clean up and exits 0.`)
	g.timeoutFlag(fs)
	olderThan := fs.Duration("older-than", 24*time.Hour, fmt.Sprintf("delete the rows of leases that ended more than `D` ago (at least %s)", sqllease.MinCleanupAge))
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	u, err := g.storeURL("cleanup", fs)
	if err != nil {
		return err
	}
	if *olderThan < sqllease.MinCleanupAge {
		return usageErrorf("cleanup: --older-than %s is shorter than the minimum of %s", *olderThan, sqllease.MinCleanupAge)
	}
	if _, ok := sqlDialects[strings.ToLower(u.Scheme)]; !ok {
		fmt.Fprintf(g.stdout, "nothing to clean up: %s:// stores delete expired leases on their own\n", u.Scheme)
		return nil
	}
	ctx, cancel := g.oneShot(ctx)
	defer cancel()
	l, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer closeLocker(l, &err)
	c, ok := l.(cleaner)
	if !ok {
		return failf(exitFailure, "cleanup: this backend (%T) cannot clean up", l)
	}
	n, err := bounded(ctx, func(ctx context.Context) (int64, error) { return c.Cleanup(ctx, *olderThan) }, nil)
	if err != nil {
		return g.storeError(ctx, err)
	}
	table := sqllease.DefaultTable
	if t, ok := l.(interface{ Table() string }); ok {
		table = t.Table()
	}
	fmt.Fprintf(g.stdout, "deleted %d %s from %s: names whose last lease ended more than %s ago\n", n, plural(n, "row", "rows"), table, roundDuration(*olderThan))
	return nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

var _ cleaner = (*sqllease.Locker)(nil)
