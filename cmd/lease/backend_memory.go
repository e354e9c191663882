package main

// The memory backend (mem://), always in.
import _ "github.com/leasekit/lease/backend/memory"
