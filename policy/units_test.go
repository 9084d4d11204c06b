package policy

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"10m", 10 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"90", 90 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0", 0, true},
		{" 5 ", 5 * time.Second, true},
		{"-1", 0, false},
		{"-5s", 0, false},
		{"", 0, false},
		{"abc", 0, false},
		{"10 minutes", 0, false},
		{"1e300", 0, false},
		{"NaN", 0, false},
	} {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true},
		{"64M", 64 << 20, true},
		{"64MiB", 64 << 20, true},
		{"64MB", 64 << 20, true},
		{"1G", 1 << 30, true},
		{"1gib", 1 << 30, true},
		{"2T", 2 << 40, true},
		{"8K", 8 << 10, true},
		{"0", 0, true},
		{"1X", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"1.5G", 0, false},
		{"99999999999T", 0, false},
		{"1iB", 0, false},
	} {
		got, err := ParseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	if s := FormatSize(512 << 20); s != "512MiB" {
		t.Errorf("FormatSize = %q", s)
	}
	if s := FormatSize(1000); s != "1000" {
		t.Errorf("FormatSize = %q", s)
	}
}

func TestParseModeAndRlimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint32{"1777": 0o1777, "0700": 0o700, "755": 0o755, "0o644": 0o644} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %o, %v", in, got, err)
		}
	}
	for _, bad := range []string{"9", "17777", "rwx", ""} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) accepted", bad)
		}
	}
	if r, err := ParseRlimit("unlimited"); err != nil || r != Unlimited || r.String() != "unlimited" {
		t.Errorf("ParseRlimit(unlimited) = %v, %v", r, err)
	}
	if r, err := ParseRlimit("1GiB"); err != nil || r != 1<<30 {
		t.Errorf("ParseRlimit(1GiB) = %v, %v", r, err)
	}
	if _, err := ParseRlimit("lots"); err == nil {
		t.Error("ParseRlimit(lots) accepted")
	}
}

// TestRlimitsWrittenByKind: a count is written as a number, a byte limit
// as a size, and what is written reads back the same.
func TestRlimitsWrittenByKind(t *testing.T) {
	t.Parallel()
	rs := Rlimits{"nofile": 65536, "nproc": 1024, "core": 0, "as": 64 << 20, "fsize": Unlimited, "cpu": 3600}
	y, err := yaml.Marshal(Limits{Rlimits: rs})
	if err != nil {
		t.Fatal(err)
	}
	want := "rlimits:\n  as: 64MiB\n  core: 0\n  cpu: 3600\n  fsize: unlimited\n  nofile: 65536\n  nproc: 1024\n"
	if string(y) != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", y, want)
	}
	j, err := json.Marshal(rs)
	if err != nil || string(j) != `{"as":"64MiB","core":0,"cpu":3600,"fsize":"unlimited","nofile":65536,"nproc":1024}` {
		t.Errorf("JSON %s, %v", j, err)
	}
	src := "limits:\n  " + strings.ReplaceAll(strings.TrimSuffix(string(y), "\n"), "\n", "\n  ") + "\n"
	p, err := Decode("p.yaml", []byte(src))
	if err != nil || !maps.Equal(p.Limits.Rlimits, rs) {
		t.Errorf("read back %v, %v; want %v", p.Limits.Rlimits, err, rs)
	}
}
