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
	//go:embed queue.lua
	queueSrc string
	//go:embed dequeue.lua
	dequeueSrc string

	acquireScript      = redis.NewScript(acquireSrc)
	renewScript        = redis.NewScript(renewSrc)
	releaseScript      = redis.NewScript(releaseSrc)
	inspectScript      = redis.NewScript(inspectSrc)
	forceReleaseScript = redis.NewScript(forceReleaseSrc)
	// fairScript is queue.lua with acquire.lua after it: AcquireQueued.
	fairScript    = redis.NewScript(fairSrc)
	fairSrc       = queueSrc + "\n" + acquireSrc
	dequeueScript = redis.NewScript(dequeueSrc)

	// allSources is every script's text, for SCRIPT LOAD.
	allSources = []string{acquireSrc, renewSrc, releaseSrc, inspectSrc, forceReleaseSrc, fairSrc, dequeueSrc}
)
