// Package classify lets a dialect package of backend/sql teach sqllease
// which of its driver's errors mean "the database rolled the statement
// back whole, send it again", for drivers whose errors expose that through
// no method sqllease can call without importing the driver (go-sql-driver's
// *MySQLError keeps its number in a struct field). sqllease asks Retryable
// after its own checks; a dialect package calls Register from its init, so
// importing it is what makes its driver's errors known.
package classify

import "sync"

var (
	mu  sync.RWMutex
	fns []func(error) bool
)

// Register adds f to the classifiers Retryable consults. f must return
// true only for errors after which the statement is known not to have
// taken effect (a deadlock victim, a serialization failure), never for an
// error that leaves the outcome unknown, such as a lost connection.
func Register(f func(error) bool) {
	if f == nil {
		panic("classify: Register with a nil func")
	}
	mu.Lock()
	defer mu.Unlock()
	fns = append(fns, f)
}

// Retryable reports whether a registered classifier says err may simply
// be sent again.
func Retryable(err error) bool {
	mu.RLock()
	defer mu.RUnlock()
	for _, f := range fns {
		if f(err) {
			return true
		}
	}
	return false
}
