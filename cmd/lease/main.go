package main

import (
	"context"
	"errors"
	"flag"
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
	if url, ok := os.LookupEnv(checkChildEnv); ok {
		os.Exit(checkChild(url))
	}
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(report(err, os.Stderr))
}

// report prints err for people and returns the exit code for it.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
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

const usage = `usage: lease [--backend URL] COMMAND [ARGS]

Commands:
  run [flags] NAME -- COMMAND [ARGS...]  run COMMAND while holding the lease NAME
  status [--json] NAME                   show who holds NAME
  list [--json] [PREFIX]                 list the held leases whose names start with PREFIX
  release --force NAME                   end the current tenure of NAME, whoever holds it
  check [flags] URL                      run the conformance suite against a store

The store is --backend URL, else $LEASE_BACKEND, else a SQLite file in the
user's cache directory. Run "lease COMMAND -h" for a command's flags.
`

// run parses the global flags and runs the command args name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lease", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	backend := fs.String("backend", "", "the store's `URL` (default $LEASE_BACKEND, else a SQLite file in the user cache directory)")
	timeout := fs.Duration("timeout", defaultTimeout, "how long status, list and release wait for an unreachable store")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	args = fs.Args()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: exitUsage}
	}
	g := &globals{backend: *backend, timeout: *timeout, stdout: stdout, stderr: stderr}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "run":
		return g.run(ctx, args)
	case "status":
		return g.status(ctx, args)
	case "list":
		return g.list(ctx, args)
	case "release":
		return g.release(ctx, args)
	case "check":
		return g.check(ctx, args)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageErrorf("unknown command %q (want run, status, list, release or check; see lease -h)", cmd)
}

// globals is what every command shares: the global flags and the output.
type globals struct {
	backend        string
	timeout        time.Duration
	stdout, stderr io.Writer
}

// defaultTimeout bounds the one-shot commands, so that an unreachable
// store is a clear error rather than a hang (some clients, such as etcd's,
// retry for as long as the context allows).
const defaultTimeout = 30 * time.Second

// timeoutFlag adds --timeout to the flags of status, list and release, so
// that it may come before or after the command.
func (g *globals) timeoutFlag(fs *flag.FlagSet) {
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "how long to wait for a store that does not answer")
}

// oneShot bounds ctx by --timeout for status, list and release.
func (g *globals) oneShot(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, g.timeout)
}

// flags returns a FlagSet for the command name that also accepts
// --backend, so it may come before or after the command.
func (g *globals) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("lease "+name, flag.ContinueOnError)
	fs.SetOutput(g.stderr)
	fs.Usage = func() {
		fmt.Fprintf(g.stderr, "usage: lease %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	fs.StringVar(&g.backend, "backend", g.backend, "the store's `URL` (default $LEASE_BACKEND, else a SQLite file in the user cache directory)")
	return fs
}

// parseError turns a flag parsing error into a usage error; the flag
// package has printed the details already.
func parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &exitError{code: exitUsage}
}
