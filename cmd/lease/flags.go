package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// The command line is parsed with spf13/pflag: GNU-style --flags that may
// also follow a command's arguments (lease status NAME --json), typed
// parse errors that become one line each, and knowing which flags were
// given. Go's single-dash spelling (-ttl 30s) still works.

// errHelp is returned when --help was asked for; the help has been
// printed and lease exits 0.
var errHelp = pflag.ErrHelp

// flagSet is one command's flags.
type flagSet struct {
	*pflag.FlagSet
	g        *globals
	cmd      string // "lease" or "lease run", for messages
	synopsis string // "run [flags] NAME -- ...", then a blank line and a description
	// fromEnv says which flags may come from the environment.
	fromEnv func(name string) bool
	// interspersed: flags may follow arguments. Not for the global flags,
	// which end at the command's name, nor for run, whose COMMAND's own
	// flags follow NAME.
	interspersed bool
}

func (g *globals) newFlagSet(cmd, synopsis string, interspersed bool) *flagSet {
	fs := &flagSet{
		FlagSet:      pflag.NewFlagSet(cmd, pflag.ContinueOnError),
		g:            g,
		cmd:          cmd,
		synopsis:     synopsis,
		fromEnv:      envAllowed,
		interspersed: interspersed,
	}
	fs.SetInterspersed(interspersed)
	fs.SetOutput(io.Discard) // errors become one line; help goes to stdout
	fs.Usage = func() { fs.printHelp(g.stdout) }
	fs.SortFlags = false
	return fs
}

// envAllowed is the rule for every command but check: each flag may come
// from $LEASE_<FLAG>, except --owner (lease run gives COMMAND its owner as
// $LEASE_OWNER, which must not become the owner of a lease run inside
// COMMAND: it would re-enter the outer tenure) and --force (a deliberate
// act, never a standing setting).
func envAllowed(name string) bool { return name != "owner" && name != "force" && name != "help" }

// envName is the environment variable of the flag name: LEASE_ and the
// name in capitals with dashes as underscores (--renew-every:
// LEASE_RENEW_EVERY).
func envName(name string) string {
	return "LEASE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Duration defines a duration flag that also takes a bare number as
// seconds, like etcdctl: --ttl 30 is --ttl 30s.
func (fs *flagSet) Duration(name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	fs.DurationVar(p, name, value, usage)
	return p
}

// DurationVar is Duration into p.
func (fs *flagSet) DurationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

// Parse parses args, then fills the flags that were not given from the
// environment. Its errors are ready for report: one line, exit 2.
func (fs *flagSet) Parse(args []string) error {
	if err := fs.FlagSet.Parse(fs.longForms(args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usageErrorf("%s%s; see %s --help", fs.prefix(), fs.describe(err), fs.cmd)
	}
	fs.Visit(func(f *pflag.Flag) { fs.g.given[f.Name] = "--" + f.Name })
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || fs.g.given[f.Name] != "" || !fs.fromEnv(f.Name) {
			return
		}
		env := envName(f.Name)
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = usageErrorf("$%s=%q (%s--%s): %v", env, v, strings.TrimSuffix(fs.prefix(), ": ")+"'s ", f.Name, cause(serr))
			return
		}
		fs.g.given[f.Name] = "$" + env
	})
	return err
}

// prefix starts the command's messages: "run: ", or "" for the global
// flags.
func (fs *flagSet) prefix() string {
	if c, ok := strings.CutPrefix(fs.cmd, "lease "); ok {
		return c + ": "
	}
	return ""
}

// longForms rewrites Go's single-dash long flags (-ttl 30s, -json) into
// pflag's double-dash form, for command lines written for the flag
// package. It stops where flags stop.
func (fs *flagSet) longForms(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			if a == "--" || !fs.interspersed {
				return append(out, args[i:]...)
			}
			out = append(out, a)
			continue
		}
		name, hasValue := strings.CutPrefix(a, "--")
		if !hasValue {
			name = a[1:]
			if n, _, _ := strings.Cut(name, "="); n == "help" || fs.Lookup(n) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
		// Step over the flag's value, which may start with a dash.
		if n, _, eq := strings.Cut(name, "="); !eq {
			if f := fs.Lookup(n); f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		}
	}
	return out
}

// describe turns a pflag error into a sentence, suggesting the flag a
// misspelt one was meant to be.
func (fs *flagSet) describe(err error) string {
	var (
		notExist *pflag.NotExistError
		invalid  *pflag.InvalidValueError
		required *pflag.ValueRequiredError
	)
	switch {
	case errors.As(err, &invalid):
		return fmt.Sprintf("--%s %q: %v", invalid.GetFlag().Name, invalid.GetValue(), cause(err))
	case errors.As(err, &required):
		return fmt.Sprintf("--%s needs a value", required.GetSpecifiedName())
	case errors.As(err, &notExist):
		name := notExist.GetSpecifiedName()
		if name == "" {
			return fmt.Sprintf("unknown flag -%s", notExist.GetSpecifiedShortnames())
		}
		var names []string
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		if s := suggest(name, names); s != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, s)
		}
		return fmt.Sprintf("unknown flag --%s", name)
	}
	return err.Error()
}

// cause is the error a flag's Value.Set returned, without pflag's
// wrapping, in words.
func cause(err error) error {
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne) && ne.Func == "ParseBool":
		return errors.New("want true or false")
	case errors.As(err, &ne):
		return errors.New("not a whole number")
	}
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// printHelp prints the command's synopsis, description and flags.
func (fs *flagSet) printHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: lease %s\n", fs.synopsis)
	if !fs.HasFlags() {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	type line struct{ flag, usage string }
	var lines []line
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		arg, usage := pflag.UnquoteUsage(f)
		switch arg {
		case "duration":
			arg = "D"
		case "int":
			arg = "N"
		case "string":
			arg = "S"
		}
		if arg != "" {
			arg = " " + arg
		}
		if def := f.DefValue; def != "" && def != "0" && def != "0s" && def != "false" && !strings.HasPrefix(def, "-") {
			usage += " (default " + def + ")"
		}
		l := line{"--" + f.Name + arg, usage}
		width = max(width, len(l.flag))
		lines = append(lines, l)
	})
	for _, l := range lines {
		text := wrap(l.usage, max(78-width-4, 30))
		for i, t := range text {
			name := ""
			if i == 0 {
				name = l.flag
			}
			fmt.Fprintf(w, "  %-*s  %s\n", width, name, t)
		}
	}
	var env, not []string
	fs.VisitAll(func(f *pflag.Flag) {
		if fs.fromEnv(f.Name) {
			env = append(env, f.Name)
		} else if f.Name != "help" {
			not = append(not, "--"+f.Name)
		}
	})
	example := ""
	for _, name := range env {
		if example == "" || (strings.Contains(name, "-") && !strings.Contains(example, "-")) {
			if name != "backend" || len(env) == 1 {
				example = name
			}
		}
	}
	var note string
	switch {
	case len(env) == 0:
		return
	case len(env) == 1:
		note = fmt.Sprintf("--%s may also come from $%s; the command line wins. No other flag comes from the environment.", env[0], envName(env[0]))
	case len(not) == 0:
		note = fmt.Sprintf("Every flag may also come from $LEASE_<FLAG> (--%s: $%s); the command line wins.", example, envName(example))
	default:
		note = fmt.Sprintf("Flags may also come from $LEASE_<FLAG> (--%s: $%s), except %s; the command line wins.", example, envName(example), strings.Join(not, " and "))
	}
	fmt.Fprintf(w, "\n%s\n", strings.Join(wrap(note, 76), "\n"))
}

// wrap breaks text into lines of at most width runes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}

// durationValue is a time.Duration flag that takes a bare number as
// seconds.
type durationValue time.Duration

var bareSeconds = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// parseDuration reads a Go duration (1m30s, 500ms) or a number of seconds
// (30, 1.5).
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if bareSeconds.MatchString(s) {
		s += "s"
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("not a duration: want e.g. 30s, 1m30s, 500ms, or 30 for seconds")
	}
	return v, nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }

// suggest returns the candidate closest to word when it is close enough
// to be a likely misspelling, else "".
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	for _, c := range sorted {
		d := editDistance(word, c)
		if d < bestD && d < len(c) {
			best, bestD = c, d
		}
	}
	if best == "" {
		// A prefix of exactly one candidate: "stat" for "status".
		for _, c := range sorted {
			if len(word) >= 2 && strings.HasPrefix(c, word) {
				if best != "" {
					return ""
				}
				best = c
			}
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours each cost
// one, so "stauts" is one from "status".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
