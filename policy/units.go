package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// Duration is a non-negative duration written in Go syntax ("90s", "10m")
// or as a bare number of seconds. 0 means "none".
type Duration time.Duration

// Size is a byte count written as a number or with a binary suffix:
// K, M, G, T, optionally followed by "i" and "B" ("64M" = "64MiB").
type Size int64

// Mode is a permission mode written in octal ("1777", "0700").
type Mode uint32

// Rlimit is a resource limit: a number, a size, or "unlimited".
type Rlimit uint64

// Unlimited is RLIM_INFINITY.
const Unlimited = Rlimit(math.MaxUint64)

// ParseDuration parses a policy or flag duration. Bare numbers are seconds;
// negative values are refused.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration (write e.g. 90s, 10m or a number of seconds)")
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f > float64(math.MaxInt64)/float64(time.Second) {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		d = time.Duration(f * float64(time.Second))
		if f < 0 {
			d = -1
		}
	} else {
		d, err = time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q (write e.g. 90s, 10m, 1h30m or a number of seconds)", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative: give 0 or more (0 turns a limit off; a grace of 0 kills at once)", s)
	}
	return d, nil
}

// ParseSize parses a byte count such as 512MiB, 1G or 4096.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "KMGTiBkmgtb")
	suffix := strings.ToUpper(t[len(num):])
	var shift uint
	switch strings.TrimSuffix(strings.TrimSuffix(suffix, "B"), "I") {
	case "":
		if suffix != "" && suffix != "B" {
			return 0, fmt.Errorf("invalid size %q (write e.g. 512MiB, 1G or a number of bytes)", s)
		}
	case "K":
		shift = 10
	case "M":
		shift = 20
	case "G":
		shift = 30
	case "T":
		shift = 40
	default:
		return 0, fmt.Errorf("invalid size %q (write e.g. 512MiB, 1G or a number of bytes)", s)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q (write e.g. 512MiB, 1G or a number of bytes)", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return n << shift, nil
}

// FormatSize writes n with the largest binary suffix that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// PosError is a decoding error at a YAML position.
type PosError struct {
	Line, Column int
	Msg          string
	// Mismatch marks a value of the wrong kind (a list for a duration),
	// which the decoder rewrites as what the field expects.
	Mismatch bool
}

func (e *PosError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg) }

// scalar returns the literal text of a scalar node, or a positioned error.
func scalar(node ast.Node, what string) (string, error) {
	tok := node.GetToken()
	switch node.Type() {
	case ast.StringType, ast.IntegerType, ast.FloatType:
		return tok.Value, nil
	}
	return "", &PosError{Line: tok.Position.Line, Column: tok.Position.Column, Msg: fmt.Sprintf("%s must be a scalar, not %s", what, node.Type()), Mismatch: true}
}

func posErr(node ast.Node, err error) error {
	p := node.GetToken().Position
	return &PosError{Line: p.Line, Column: p.Column, Msg: err.Error()}
}

// UnmarshalYAML implements yaml.NodeUnmarshaler.
func (d *Duration) UnmarshalYAML(node ast.Node) error {
	s, err := scalar(node, "a duration")
	if err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return posErr(node, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.InterfaceMarshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText keeps JSON output readable.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func (d Duration) String() string {
	if d == 0 {
		return "0"
	}
	return time.Duration(d).String()
}

// UnmarshalYAML implements yaml.NodeUnmarshaler.
func (s *Size) UnmarshalYAML(node ast.Node) error {
	v, err := scalar(node, "a size")
	if err != nil {
		return err
	}
	n, err := ParseSize(v)
	if err != nil {
		return posErr(node, err)
	}
	*s = Size(n)
	return nil
}

// MarshalYAML implements yaml.InterfaceMarshaler.
func (s Size) MarshalYAML() (any, error) { return FormatSize(int64(s)), nil }

// MarshalText keeps JSON output readable.
func (s Size) MarshalText() ([]byte, error) { return []byte(FormatSize(int64(s))), nil }

// UnmarshalText reads what MarshalText wrote.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := ParseSize(string(b))
	*s = Size(n)
	return err
}

// ParseMode parses an octal permission mode.
func ParseMode(s string) (uint32, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "0o"), 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("invalid mode %q (write an octal mode such as \"0700\" or \"1777\")", s)
	}
	return uint32(n), nil
}

// UnmarshalYAML implements yaml.NodeUnmarshaler. The literal text is read as
// octal, so `mode: 1777` and `mode: "1777"` mean the same.
func (m *Mode) UnmarshalYAML(node ast.Node) error {
	v, err := scalar(node, "a mode")
	if err != nil {
		return err
	}
	n, err := ParseMode(v)
	if err != nil {
		return posErr(node, err)
	}
	*m = Mode(n)
	return nil
}

func (m Mode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// MarshalYAML implements yaml.InterfaceMarshaler.
func (m Mode) MarshalYAML() (any, error) { return m.String(), nil }

// MarshalText keeps JSON output readable.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (m *Mode) UnmarshalText(b []byte) error {
	n, err := ParseMode(string(b))
	*m = Mode(n)
	return err
}

// ParseRlimit parses "unlimited", a number or a size.
func ParseRlimit(s string) (Rlimit, error) {
	if strings.TrimSpace(s) == "unlimited" {
		return Unlimited, nil
	}
	n, err := ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("invalid limit %q (write a number, a size such as 1GiB, or unlimited)", s)
	}
	return Rlimit(n), nil
}

// UnmarshalYAML implements yaml.NodeUnmarshaler.
func (r *Rlimit) UnmarshalYAML(node ast.Node) error {
	v, err := scalar(node, "a limit")
	if err != nil {
		return err
	}
	n, err := ParseRlimit(v)
	if err != nil {
		return posErr(node, err)
	}
	*r = n
	return nil
}

func (r Rlimit) String() string {
	if r == Unlimited {
		return "unlimited"
	}
	return FormatSize(int64(r))
}

// MarshalYAML implements yaml.InterfaceMarshaler.
func (r Rlimit) MarshalYAML() (any, error) { return r.String(), nil }

// MarshalText keeps JSON output readable.
func (r Rlimit) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (r *Rlimit) UnmarshalText(b []byte) error {
	v, err := ParseRlimit(string(b))
	*r = v
	return err
}

// Rlimits maps a resource to its limit. Written out, a count (nofile,
// nproc, ...) is a number and a size (as, core, fsize, ...) a size:
// `nofile: 65536`, not 64KiB.
type Rlimits map[string]Rlimit

// countRlimits are the resources whose limit is not a number of bytes.
var countRlimits = []string{"cpu", "locks", "nice", "nofile", "nproc", "rtprio", "rttime", "sigpending"}

// text is each limit as it is written: a number, or a size or
// "unlimited" as a string.
func (rs Rlimits) text() map[string]any {
	out := make(map[string]any, len(rs))
	for k, r := range rs {
		switch {
		case r == Unlimited:
			out[k] = r.String()
		case r == 0 || slices.Contains(countRlimits, k):
			out[k] = uint64(r)
		default:
			out[k] = r.String()
		}
	}
	return out
}

// MarshalYAML implements yaml.InterfaceMarshaler.
func (rs Rlimits) MarshalYAML() (any, error) { return rs.text(), nil }

// MarshalJSON writes what MarshalYAML does.
func (rs Rlimits) MarshalJSON() ([]byte, error) { return json.Marshal(rs.text()) }

// Memory is a memory cap: a size, or a percentage of the host's RAM
// ("50%", as systemd's MemoryMax= takes), resolved when a run starts.
// Exactly one of Bytes and Percent is set.
type Memory struct {
	Bytes   int64
	Percent int
}

// ParseMemory parses a size (8GiB) or a percentage from 1% to 100%.
func ParseMemory(s string) (Memory, error) {
	t := strings.TrimSpace(s)
	if num, ok := strings.CutSuffix(t, "%"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if err != nil || n < 1 || n > 100 {
			return Memory{}, fmt.Errorf("invalid memory %q (write a percentage of the host's RAM from 1%% to 100%%, or a size such as 8GiB)", s)
		}
		return Memory{Percent: n}, nil
	}
	n, err := ParseSize(t)
	if err != nil {
		return Memory{}, fmt.Errorf("invalid memory %q (write a size such as 8GiB, or a percentage of the host's RAM such as 50%%)", s)
	}
	return Memory{Bytes: n}, nil
}

// Of resolves m on a host with total bytes of RAM.
func (m Memory) Of(total int64) int64 {
	if m.Percent == 0 {
		return m.Bytes
	}
	return total * int64(m.Percent) / 100 // RAM is far below 2^56 bytes
}

func (m Memory) String() string {
	if m.Percent != 0 {
		return strconv.Itoa(m.Percent) + "%"
	}
	return FormatSize(m.Bytes)
}

// UnmarshalYAML implements yaml.NodeUnmarshaler.
func (m *Memory) UnmarshalYAML(node ast.Node) error {
	v, err := scalar(node, "a memory cap")
	if err != nil {
		return err
	}
	if *m, err = ParseMemory(v); err != nil {
		return posErr(node, err)
	}
	return nil
}

// MarshalYAML implements yaml.InterfaceMarshaler.
func (m Memory) MarshalYAML() (any, error) { return m.String(), nil }

// MarshalText keeps JSON output readable.
func (m Memory) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (m *Memory) UnmarshalText(b []byte) error {
	v, err := ParseMemory(string(b))
	*m = v
	return err
}
