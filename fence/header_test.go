package fence_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/fence"
)

func TestEncodeName(t *testing.T) {
	for name, want := range map[string]string{
		"reports/daily":   "reports/daily",
		"job:reindex@eu":  "job:reindex@eu",
		"a-b.c_d~e":       "a-b.c_d~e",
		"a b":             "a%20b",
		"a\x00b":          "a%00b",
		"line\r\nX: y":    "line%0D%0AX:%20y",
		"100%":            "100%25",
		"{tag}":           "%7Btag%7D",
		"é":               "%C3%A9",
		"a+b=c&d?e#f,g;h": "a%2Bb%3Dc%26d%3Fe%23f%2Cg%3Bh",
	} {
		if got := fence.EncodeName(name); got != want {
			t.Errorf("EncodeName(%q) = %q, want %q", name, got, want)
		}
		back, err := fence.DecodeName(fence.EncodeName(name))
		if err != nil || back != name {
			t.Errorf("DecodeName(EncodeName(%q)) = %q, %v", name, back, err)
		}
	}
}

func TestDecodeNameLenient(t *testing.T) {
	// Any visible ASCII character may be sent as itself, and hex digits
	// in either case, so a name typed into curl works.
	for raw, want := range map[string]string{
		"{tag}":      "{tag}",
		"a+b":        "a+b",
		"%c3%a9":     "é",
		`"quoted"`:   `"quoted"`,
		"%7b%7D":     "{}",
		"a%2fb/c%3A": "a/b/c:",
	} {
		got, err := fence.DecodeName(raw)
		if err != nil || got != want {
			t.Errorf("DecodeName(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestDecodeNameRefuses(t *testing.T) {
	for raw, why := range map[string]string{
		"":                                      "empty",
		"a b":                                   "0x20",
		"a\tb":                                  "0x09",
		"é":                                     "0xc3",
		"a%":                                    "'%'",
		"a%2":                                   "'%'",
		"a%zz":                                  "'%'",
		"%ff":                                   "UTF-8",
		"%00":                                   "", // a valid name: NUL
		strings.Repeat("a", lease.MaxNameLen+1): "longer than",
		strings.Repeat("%41", lease.MaxNameLen+1): "longer than",
	} {
		got, err := fence.DecodeName(raw)
		if raw == "%00" {
			if err != nil || got != "\x00" {
				t.Errorf("DecodeName(%%00) = %q, %v; want NUL", got, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("DecodeName(%.20q) = %.20q; want an error", raw, got)
			continue
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), why) {
			t.Errorf("DecodeName(%.20q): %v; want ErrInvalid mentioning %q", raw, err, why)
		}
	}
}

// TestHeaderLongNames tests that the longest names, of any bytes, go
// through a header and back.
func TestHeaderLongNames(t *testing.T) {
	all := make([]byte, 0, lease.MaxNameLen)
	for i := 0; len(all) < lease.MaxNameLen; i++ {
		all = append(all, byte(i%128)) // every ASCII byte, control ones too
	}
	for _, name := range []string{string(all), strings.Repeat("日", lease.MaxNameLen/3), strings.Repeat("%", lease.MaxNameLen)} {
		h := http.Header{}
		if err := fence.SetHeader(h, name, fence.MaxToken); err != nil {
			t.Fatalf("SetHeader: %v", err)
		}
		gotName, gotToken, err := fence.ParseHeader(h)
		if err != nil || gotName != name || gotToken != fence.MaxToken {
			t.Fatalf("ParseHeader after SetHeader(%.20q...): %.20q, %d, %v", name, gotName, gotToken, err)
		}
	}
}

func TestParseHeaderRefuses(t *testing.T) {
	for _, c := range []struct {
		name, token []string
		why         string
	}{
		{nil, []string{"5"}, "no Lease-Name header"},
		{[]string{"n"}, nil, "no Lease-Token header"},
		{[]string{"n", "m"}, []string{"5"}, "2 Lease-Name headers"},
		{[]string{"n"}, []string{"5", "6"}, "2 Lease-Token headers"},
		{[]string{"n"}, []string{""}, "is empty"},
		{[]string{"n"}, []string{"0"}, "leading zero"},
		{[]string{"n"}, []string{"05"}, "leading zero"},
		{[]string{"n"}, []string{"-5"}, "not a decimal"},
		{[]string{"n"}, []string{"+5"}, "not a decimal"},
		{[]string{"n"}, []string{"5x"}, "not a decimal"},
		{[]string{"n"}, []string{"0x10"}, "not a decimal"},
		{[]string{"n"}, []string{"9223372036854775808"}, "larger than the maximum"},
		{[]string{"n"}, []string{"99999999999999999999999"}, "larger than the maximum"},
		{[]string{"a b"}, []string{"5"}, "percent-encode"},
	} {
		h := http.Header{}
		for _, v := range c.name {
			h.Add(fence.HeaderName, v)
		}
		for _, v := range c.token {
			h.Add(fence.HeaderToken, v)
		}
		_, _, err := fence.ParseHeader(h)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseHeader(name %q, token %q): %v; want ErrInvalid saying %q", c.name, c.token, err, c.why)
		}
	}
	// Surrounding whitespace is not part of a header value.
	h := http.Header{fence.HeaderName: {" n "}, fence.HeaderToken: {" 9223372036854775807 "}}
	if name, token, err := fence.ParseHeader(h); err != nil || name != "n" || token != fence.MaxToken {
		t.Errorf("ParseHeader with spaces around the values: %q, %d, %v", name, token, err)
	}
}

func TestSetHeaderRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		token uint64
	}{{"", 1}, {"n", 0}, {"n", fence.MaxToken + 1}, {"\xff", 1}} {
		h := http.Header{}
		if err := fence.SetHeader(h, c.name, c.token); !errors.Is(err, lease.ErrInvalid) || len(h) != 0 {
			t.Errorf("SetHeader(%q, %d): %v, header %v; want ErrInvalid and nothing set", c.name, c.token, err, h)
		}
	}
}

func FuzzNameEncoding(f *testing.F) {
	for _, s := range []string{"a", "a b", "\x00", "%", "{x}", "日本", "a%20b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		enc := fence.EncodeName(name)
		for i := 0; i < len(enc); i++ {
			if enc[i] <= 0x20 || enc[i] >= 0x7f {
				t.Fatalf("EncodeName(%q) = %q has byte %#x, not allowed in a header", name, enc, enc[i])
			}
		}
		got, err := fence.DecodeName(enc)
		if driver.CheckName(name) != nil {
			if err == nil {
				t.Fatalf("DecodeName(EncodeName(%q)) accepted an invalid name", name)
			}
			return
		}
		if err != nil || got != name {
			t.Fatalf("DecodeName(EncodeName(%q)) = %q, %v", name, got, err)
		}
	})
}
