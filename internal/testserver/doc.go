// Package testserver starts private server processes for the tests that
// must not touch the shared servers: restarts, kills, failovers and
// clusters. Each server runs on free loopback ports with its own data
// directory under the test's temporary directory, is ready (it answers)
// when the helper returns, and is stopped, and waited for, when the test
// ends. Its log is kept and printed only when the test fails.
//
//	r := testserver.StartRedis(t, nil)             // r.Addr(), r.URL()
//	r.Restart()                                    // empty again (no persistence)
//	pg := testserver.StartPostgres(t, nil)         // pg.URL(): trust auth
//	pg.Kill(); pg.Start()                          // crash and recovery
//	e := testserver.StartEtcd(t, &testserver.EtcdOptions{Members: 3})
//	old := e.KillLeader()                          // a new leader is elected
//	e.Member(old).Start()
//
// Helpers: StartRedis, StartSentinel (a master, replicas and three
// sentinels), StartRedisCluster, StartEtcd (one member or a cluster),
// StartPostgres and StartMariaDB. Every single server is a *Process with
// Stop, Start, Restart, Kill, Pause and Resume.
//
// A helper whose program is not installed skips the test with a message
// naming the Debian package to install, or fails it when
// LEASE_TEST_REQUIRE_ALL=1 (the rule of internal/testenv). Servers never
// outlive the test binary: cleanup kills them, and on Linux each one gets
// SIGKILL from the kernel if the test binary dies (Pdeathsig, from a
// thread kept alive for that purpose).
//
// Methods fail the test when they cannot do what they promise, so call
// them from the goroutine of the test that started the server, and keep
// the workers of a fault test in other goroutines.
package testserver
