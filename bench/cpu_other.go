//go:build !unix

package main

import "time"

// selfCPU is not measured here.
func selfCPU() (time.Duration, bool) { return 0, false }
