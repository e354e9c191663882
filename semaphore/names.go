package semaphore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Prefix begins every slot's lease name. Names beginning with it are
// reserved for semaphores (see the package documentation).
const Prefix = "lease.semaphore/"

// MaxSlots is the largest capacity N: a waiter watches every slot, and a
// full semaphore costs N round trips to find full.
const MaxSlots = 1024

// SlotName returns the lease name of slot index of the semaphore name:
// Prefix, name, '#', and index in decimal. It does not check its
// arguments; Acquire and Run refuse a name or an index they cannot use.
func SlotName(name string, index int) string {
	return Prefix + name + "#" + strconv.Itoa(index)
}

// ParseSlotName reads a lease name made by SlotName back into the
// semaphore's name and the slot's index. ok is false for any other lease
// name: one without Prefix, without a '#', or whose part after the last
// '#' is not an index written as SlotName writes it (decimal digits, no
// sign, no leading zero, below MaxSlots).
func ParseSlotName(leaseName string) (name string, index int, ok bool) {
	rest, ok := strings.CutPrefix(leaseName, Prefix)
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 0 {
		return "", 0, false
	}
	name, digits := rest[:i], rest[i+1:]
	if name == "" || digits == "" || len(digits) > 1 && digits[0] == '0' {
		return "", 0, false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	index, err := strconv.Atoi(digits)
	if err != nil || index >= MaxSlots {
		return "", 0, false
	}
	return name, index, true
}

// check refuses a semaphore name, capacity n or ttl that Acquire and Run
// cannot use, with an error matching lease.ErrInvalid that names the
// problem.
func check(name string, n int, ttl time.Duration) error {
	switch {
	case n < 1:
		return fmt.Errorf("%w: semaphore %q: capacity %d: want at least 1 slot", lease.ErrInvalid, name, n)
	case n > MaxSlots:
		return fmt.Errorf("%w: semaphore %q: capacity %d: at most %d slots (MaxSlots)", lease.ErrInvalid, name, n, MaxSlots)
	}
	if err := driver.CheckName(name); err != nil {
		return fmt.Errorf("semaphore name: %w", err)
	}
	if longest := SlotName(name, n-1); len(longest) > lease.MaxNameLen {
		return fmt.Errorf("%w: semaphore name is %d bytes: with %d slots, its slot names (%s, '#' and the index) take %d more, and a lease name has at most %d bytes; use a name of at most %d bytes",
			lease.ErrInvalid, len(name), n, Prefix, len(longest)-len(name), lease.MaxNameLen, lease.MaxNameLen-(len(longest)-len(name)))
	}
	if err := driver.CheckTTL(ttl); err != nil {
		return fmt.Errorf("semaphore %q: %w", name, err)
	}
	return nil
}

// slotName is the one place that turns a capacity and an index into the
// lease a holder asks for: slot index of name, which must be below n.
func slotName(name string, n, index int) string {
	if index < 0 || index >= n {
		panic(fmt.Sprintf("semaphore: slot %d of %q is outside its capacity %d", index, name, n))
	}
	return SlotName(name, index)
}
