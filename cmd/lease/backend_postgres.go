//go:build !lease_nopostgres

package main

// The postgres backend; build with -tags lease_nopostgres to leave it out.
import _ "github.com/leasekit/lease/backend/sql/postgres"
