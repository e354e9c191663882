// Package all registers every backend of this module with lease.Open, for
// programs that take the store's URL from their configuration and want any
// of them to work:
//
//	import _ "github.com/leasekit/lease/backend/all"
//
//	l, err := lease.Open(ctx, os.Getenv("LEASE_BACKEND"))
//
// It imports, for their side effects:
//
//	backend/memory        mem://
//	backend/sql/sqlite    sqlite:
//	backend/sql/postgres  postgres://, postgresql://
//	backend/sql/mysql     mysql://
//	backend/redis         redis://, rediss://
//	backend/etcd          etcd://
//
// A program that needs one store should import only that backend's
// package: each pulls in its own client library.
package all

import (
	// Register the "etcd" scheme.
	_ "github.com/leasekit/lease/backend/etcd"
	// Register the "mem" scheme.
	_ "github.com/leasekit/lease/backend/memory"
	// Register the "redis" and "rediss" schemes.
	_ "github.com/leasekit/lease/backend/redis"
	// Register the "mysql" scheme.
	_ "github.com/leasekit/lease/backend/sql/mysql"
	// Register the "postgres" and "postgresql" schemes.
	_ "github.com/leasekit/lease/backend/sql/postgres"
	// Register the "sqlite" scheme.
	_ "github.com/leasekit/lease/backend/sql/sqlite"
)
