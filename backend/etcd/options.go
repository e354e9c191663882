package etcdlease

import (
	"fmt"

	"github.com/leasekit/lease"
)

// DefaultPrefix is the key prefix a Locker uses unless WithPrefix says
// otherwise.
const DefaultPrefix = "lease/"

// Option configures a Locker made by New or Open. An option with a bad
// value makes New or Open return an error matching lease.ErrInvalid that
// names the option; options never panic.
type Option func(*options) error

type options struct {
	prefix string
}

// WithPrefix sets the key prefix under which the Locker keeps its tenures
// (default DefaultPrefix): the tenure of name is the key prefix+name. All
// keys under the prefix belong to the Locker; Lockers that must not share
// names need prefixes neither of which is a prefix of the other. An empty
// prefix is an error, since every key of the cluster would then be taken
// for a tenure.
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if prefix == "" {
			return fmt.Errorf("%w: WithPrefix(\"\"): the key prefix is empty, which would make every key of the cluster a tenure", lease.ErrInvalid)
		}
		o.prefix = prefix
		return nil
	}
}

// newOptions applies opts to the defaults and returns the first error.
func newOptions(opts []Option) (options, error) {
	o := options{prefix: DefaultPrefix}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return options{}, err
		}
	}
	return o, nil
}
