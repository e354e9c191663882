// Package bench holds benchmarks that compare the backends side by side in
// one run, so their speeds can be reported as ratios measured together:
//
//	LEASE_TEST_POSTGRES=... LEASE_TEST_MYSQL=... LEASE_TEST_REDIS=... \
//	    go test -run '^$' -bench . -benchtime 2000x ./internal/bench
//
// A backend whose server variable is unset is skipped; memory, SQLite and
// an embedded etcd always run.
package bench
