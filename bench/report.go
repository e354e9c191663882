package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// table is one mode's results.
type table struct {
	title string
	cols  []string
	rows  [][]string
	notes []string // under the table: what each side does, errors
}

// comparison columns: ratio is always arranged so that >1 favours lease.
var compareCols = []string{"store", "operation", "lease", "peer", "ratio"}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// note adds a line under the table once.
func (t *table) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	for _, n := range t.notes {
		if n == s {
			return
		}
	}
	t.notes = append(t.notes, s)
}

// report is everything one run prints.
type report struct {
	header []string
	tables []*table
	footer []string
}

func (r *report) write(w io.Writer, markdown bool) {
	if markdown {
		for _, h := range r.header {
			fmt.Fprintf(w, "%s  \n", h)
		}
		for _, t := range r.tables {
			fmt.Fprintf(w, "\n**%s**\n\n", t.title)
			fmt.Fprintf(w, "| %s |\n", strings.Join(t.cols, " | "))
			fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(t.cols)))
			for _, row := range t.rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(escapeMD(row), " | "))
			}
			if len(t.notes) > 0 {
				fmt.Fprintln(w)
				for _, n := range t.notes {
					fmt.Fprintf(w, "- %s\n", n)
				}
			}
		}
		fmt.Fprintln(w)
		for _, f := range r.footer {
			fmt.Fprintf(w, "%s  \n", f)
		}
		return
	}
	for _, h := range r.header {
		fmt.Fprintln(w, h)
	}
	for _, t := range r.tables {
		fmt.Fprintf(w, "\n== %s\n", t.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.cols, "\t"))
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		_ = tw.Flush()
		for _, n := range t.notes {
			fmt.Fprintf(w, "  * %s\n", n)
		}
	}
	fmt.Fprintln(w)
	for _, f := range r.footer {
		fmt.Fprintln(w, f)
	}
}

func escapeMD(row []string) []string {
	out := make([]string, len(row))
	for i, c := range row {
		out[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return out
}

// rate formats operations per second.
func rate(x float64) string { return group(int64(math.Round(x))) + "/s" }

// group formats n with thousands separators.
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ratio formats a/b, or "—" when it has no meaning.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// ms formats a duration in milliseconds, to a sensible precision.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f < 10:
		return fmt.Sprintf("%.2fms", f)
	case f < 100:
		return fmt.Sprintf("%.1fms", f)
	}
	return fmt.Sprintf("%.0fms", f)
}

// bytesIEC formats a byte count.
func bytesIEC(n float64) string {
	switch {
	case math.Abs(n) >= 1<<30:
		return fmt.Sprintf("%.1f GiB", n/(1<<30))
	case math.Abs(n) >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case math.Abs(n) >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}

// short cuts an error message to one line of bounded length.
func short(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// plural is "1 round" or "n rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
