//go:build !lease_noetcd

package main

// The etcd backend; build with -tags lease_noetcd to leave it out.
import _ "github.com/leasekit/lease/backend/etcd"
