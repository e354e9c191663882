package redislease

import (
	_ "embed" // the Lua scripts below

	"github.com/redis/go-redis/v9"
)

// One Lua script per operation, each run as a single EVALSHA (EVAL when
// the server's script cache lacks it). Read the .lua files for what each
// does to the keys.
var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed force_release.lua
	forceReleaseSrc string
	//go:embed marks.lua
	marksSrc string
	//go:embed wait.lua
	waitHeadSrc string
	//go:embed unmark.lua
	unmarkBodySrc string

	// The scripts that read or change waiters' marks (Release,
	// ForceRelease, AcquireOrWait, StopWaiting) start with marks.lua's
	// functions.
	releaseFullSrc      = marksSrc + "\n" + releaseSrc
	forceReleaseFullSrc = marksSrc + "\n" + forceReleaseSrc
	// waitSrc is marks.lua, wait.lua and acquire.lua: AcquireOrWait.
	waitSrc   = marksSrc + "\n" + waitHeadSrc + "\n" + acquireSrc
	unmarkSrc = marksSrc + "\n" + unmarkBodySrc

	acquireScript      = redis.NewScript(acquireSrc)
	renewScript        = redis.NewScript(renewSrc)
	releaseScript      = redis.NewScript(releaseFullSrc)
	inspectScript      = redis.NewScript(inspectSrc)
	forceReleaseScript = redis.NewScript(forceReleaseFullSrc)
	waitScript         = redis.NewScript(waitSrc)
	unmarkScript       = redis.NewScript(unmarkSrc)

	// allSources is every script's text, for SCRIPT LOAD.
	allSources = []string{acquireSrc, renewSrc, releaseFullSrc, inspectSrc, forceReleaseFullSrc, waitSrc, unmarkSrc}
)
