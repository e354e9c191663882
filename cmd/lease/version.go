package main

import (
	"fmt"
	"runtime/debug"
)

// version is "lease version": the module version this binary was built
// from, as go install stamps it (v1.2.3), or "(devel)" when it was built
// from a checkout without version control information. Go 1.24 and later
// stamp a build from a git checkout with a pseudo-version instead
// (v0.0.0-20250101120000-abcdef123456, +dirty when modified).
func (g *globals) version(args []string) error {
	if len(args) > 0 {
		return usageErrorf("version takes no arguments, got %q", args[0])
	}
	fmt.Fprintf(g.stdout, "lease %s\n", moduleVersion())
	return nil
}

func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "(devel)"
	}
	return bi.Main.Version
}
