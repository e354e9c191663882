//go:build !lease_nosqlite

package main

// The sqlite backend; build with -tags lease_nosqlite to leave it out.
import _ "github.com/leasekit/lease/backend/sql/sqlite"
