package otellease_test

import "github.com/leasekit/lease"

// A fake Locker with each combination of the optional interfaces; see
// wrap_test.go.
type (
	fake struct {
		lockerOnly
	}
	fakeL struct {
		lockerOnly
		withList
	}
	fakeF struct {
		lockerOnly
		withForce
	}
	fakeLF struct {
		lockerOnly
		withList
		withForce
	}
	fakeB struct {
		lockerOnly
		withBatch
	}
	fakeLB struct {
		lockerOnly
		withList
		withBatch
	}
	fakeFB struct {
		lockerOnly
		withForce
		withBatch
	}
	fakeLFB struct {
		lockerOnly
		withList
		withForce
		withBatch
	}
	fakeW struct {
		lockerOnly
		withWatch
	}
	fakeLW struct {
		lockerOnly
		withList
		withWatch
	}
	fakeFW struct {
		lockerOnly
		withForce
		withWatch
	}
	fakeLFW struct {
		lockerOnly
		withList
		withForce
		withWatch
	}
	fakeBW struct {
		lockerOnly
		withBatch
		withWatch
	}
	fakeLBW struct {
		lockerOnly
		withList
		withBatch
		withWatch
	}
	fakeFBW struct {
		lockerOnly
		withForce
		withBatch
		withWatch
	}
	fakeLFBW struct {
		lockerOnly
		withList
		withForce
		withBatch
		withWatch
	}
)

// fakes has the fake for each combination, indexed by its bits.
var fakes = [16]lease.Locker{
	&fake{lockerOnly: only},
	&fakeL{lockerOnly: only},
	&fakeF{lockerOnly: only},
	&fakeLF{lockerOnly: only},
	&fakeB{lockerOnly: only},
	&fakeLB{lockerOnly: only},
	&fakeFB{lockerOnly: only},
	&fakeLFB{lockerOnly: only},
	&fakeW{lockerOnly: only},
	&fakeLW{lockerOnly: only},
	&fakeFW{lockerOnly: only},
	&fakeLFW{lockerOnly: only},
	&fakeBW{lockerOnly: only},
	&fakeLBW{lockerOnly: only},
	&fakeFBW{lockerOnly: only},
	&fakeLFBW{lockerOnly: only},
}
