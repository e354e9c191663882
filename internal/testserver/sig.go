package testserver

// sig names the signals the helpers send, portably.
type sig int

const (
	sigTerm sig = iota + 1
	sigInt
	sigQuit
	sigKill
	sigStop
	sigCont
)

func (s sig) String() string {
	switch s {
	case sigTerm:
		return "SIGTERM"
	case sigInt:
		return "SIGINT"
	case sigQuit:
		return "SIGQUIT"
	case sigKill:
		return "SIGKILL"
	case sigStop:
		return "SIGSTOP"
	case sigCont:
		return "SIGCONT"
	}
	return "signal?"
}
