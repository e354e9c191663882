package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit codes that are not a child's own.
const (
	exitOK       = 0
	exitFailure  = 1  // the store failed or refused, or another error
	exitUsage    = 2  // bad flags, arguments or backend URL
	exitNotHeld  = 3  // status or release: nobody holds the name
	exitLost     = 70 // run: the lease was lost while the command ran
	exitBusyDflt = 75 // run: held by another owner (EX_TEMPFAIL); --conflict-exit-code
)

// exitError ends the program with code after printing msg, if any, as one
// "lease: ..." line on stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageErrorf is a mistake in the command line: exit 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// failf is any other failure with its own exit code.
func failf(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

func main() {
	if code, ok := internalRole(); ok {
		os.Exit(code)
	}
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(report(err, os.Stderr))
}

// internalRole runs the role this binary was started for, when it is not
// the command line: the watcher that guards a lease run's command. ok is
// false otherwise.
func internalRole() (code int, ok bool) {
	if _, ok := os.LookupEnv(watcherEnv); ok {
		return watcher(), true
	}
	return 0, false
}

// report prints err for people and returns the exit code for it.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, errHelp) {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "lease: "+oneLine(ee.msg))
		}
		return ee.code
	}
	msg := oneLine(err.Error())
	if errors.Is(err, context.DeadlineExceeded) {
		msg += " (the store did not answer in time: is it reachable?)"
	}
	fmt.Fprintln(stderr, "lease: "+msg)
	return exitFailure
}

// oneLine trims the "lease: " prefix the library's errors carry (it is
// added back once) and folds the message onto one line.
func oneLine(msg string) string {
	for strings.HasPrefix(msg, "lease: ") {
		msg = strings.TrimPrefix(msg, "lease: ")
	}
	return strings.Join(strings.Fields(msg), " ")
}

const usage = `usage: lease [--backend URL] [--timeout D] COMMAND [ARGS]

Commands:
  run [flags] NAME -- COMMAND [ARGS...]  run COMMAND while holding the lease NAME
  leader [flags] NAME -- COMMAND [ARGS]  campaign for NAME; run COMMAND for one term as its leader
  observe [--json] [--once] NAME         print NAME's leader, then each change of leader
  status [--json] NAME                   show who holds NAME
  list [--json] [--watch] [PREFIX]       list the held leases whose names start with PREFIX
  top [--interval D] [PREFIX]            list them again every second: lease list --watch
  release --force NAME                   end the current tenure of NAME, whoever holds it
  check [flags] [URL]                    run the conformance suite against a store
  schema [URL]                           print the SQL that creates a SQL store's table
  cleanup [--older-than D] [URL]         delete a SQL store's rows of long-ended leases
  version                                print lease's version
  help [COMMAND]                         print this, or a command's flags

The store is --backend URL, else $LEASE_BACKEND, else a SQLite file in the
user's cache directory. --timeout (30s) bounds how long a command waits for
a store that does not answer; lease run waits at most its --ttl unless
--timeout is given. Durations are Go durations (30s, 1m30s, 500ms) or a
number of seconds. Flags may also come from $LEASE_<FLAG> (--ttl: $LEASE_TTL,
--renew-every: $LEASE_RENEW_EVERY), except --owner and --force; the command
line wins. Run "lease COMMAND --help" for a command's flags.
`

// commands are lease's commands, for "did you mean".
var commands = []string{"run", "leader", "observe", "status", "list", "top", "release", "check", "schema", "cleanup", "version", "help"}

// run parses the global flags and runs the command args name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	g := &globals{stdout: stdout, stderr: stderr, given: map[string]string{}}
	fs := g.newFlagSet("lease", "[--backend URL] [--timeout D] COMMAND [ARGS]", false)
	fs.Usage = func() { fmt.Fprint(stdout, usage) }
	fs.StringVar(&g.backend, "backend", "", backendUsage)
	fs.DurationVar(&g.timeout, "timeout", defaultTimeout, timeoutUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: exitUsage}
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "run":
		return g.run(ctx, args)
	case "leader":
		return g.leader(ctx, args)
	case "observe":
		return g.observe(ctx, args)
	case "status":
		return g.status(ctx, args)
	case "list":
		return g.list(ctx, args)
	case "top":
		return g.top(ctx, args)
	case "release":
		return g.release(ctx, args)
	case "check":
		return g.check(ctx, args)
	case "schema":
		return g.schema(args)
	case "cleanup":
		return g.cleanup(ctx, args)
	case "version":
		return g.version(args)
	case "help":
		return g.help(ctx, args)
	}
	if s := suggest(cmd, commands); s != "" {
		return usageErrorf("unknown command %q: did you mean %s? (see lease --help)", cmd, s)
	}
	return usageErrorf("unknown command %q (want %s; see lease --help)", cmd, strings.Join(commands, ", "))
}

// help is "lease help [COMMAND]": the usage, or COMMAND's help.
func (g *globals) help(ctx context.Context, args []string) error {
	switch {
	case len(args) == 0:
		fmt.Fprint(g.stdout, usage)
		return nil
	case len(args) > 1:
		return usageErrorf("help takes at most one COMMAND, got %d arguments", len(args))
	case args[0] == "help" || args[0] == "version":
		fmt.Fprint(g.stdout, usage)
		return nil
	}
	for _, c := range commands {
		if c == args[0] {
			return run(ctx, []string{args[0], "--help"}, g.stdout, g.stderr)
		}
	}
	return run(ctx, args, g.stdout, g.stderr) // the unknown-command error
}

// globals is what every command shares: the global flags and the output.
type globals struct {
	backend        string
	timeout        time.Duration
	stdout, stderr io.Writer

	// given names the flags given on the command line ("--ttl") or in
	// the environment ("$LEASE_TTL"), by flag name.
	given map[string]string
	// limit, when set, bounds opening the store instead of --timeout
	// (lease run without --timeout: its ttl), and limitBy says so.
	limit   time.Duration
	limitBy string
}

const (
	backendUsage = "the store's `URL` (default $LEASE_BACKEND, else a SQLite file in the user cache directory)"
	timeoutUsage = "give up on a store that does not answer after `D`; 0 waits as long as it takes"
)

// defaultTimeout bounds the one-shot commands, so that an unreachable
// store is a clear error rather than a hang (some clients, such as etcd's,
// retry for as long as the context allows).
const defaultTimeout = 30 * time.Second

// timeoutFlag adds --timeout to a command's flags, so that it may come
// before or after the command.
func (g *globals) timeoutFlag(fs *flagSet) {
	fs.DurationVar(&g.timeout, "timeout", g.timeout, timeoutUsage)
}

// oneShot bounds ctx by --timeout for a command that makes a few calls to
// the store; a call cut short by it is reported by storeError.
func (g *globals) oneShot(ctx context.Context) (context.Context, context.CancelFunc) {
	return g.bound(ctx, g.timeout, "--timeout")
}

// flags returns a FlagSet for the command name that also accepts
// --backend, so it may come before or after the command.
func (g *globals) flags(name, synopsis string) *flagSet {
	fs := g.newFlagSet("lease "+name, synopsis, name != "run")
	if name == "check" {
		// check's --ttl and --timeout mean something else than run's and
		// the global one: only the store comes from the environment.
		fs.fromEnv = func(flag string) bool { return flag == "backend" }
	}
	fs.StringVar(&g.backend, "backend", g.backend, backendUsage)
	return fs
}

// parseError passes on what flagSet.Parse returned: errHelp, or a usage
// error that says what was wrong.
func parseError(err error) error {
	var ee *exitError
	if errors.Is(err, errHelp) || errors.As(err, &ee) {
		return err
	}
	return usageErrorf("%v", err)
}
