//go:build !lease_nomysql

package main

// The mysql backend; build with -tags lease_nomysql to leave it out.
import _ "github.com/leasekit/lease/backend/sql/mysql"
