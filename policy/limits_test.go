package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/agentjail/agentjail/internal/testutil"
)

func TestParseMemory(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want Memory
		ok   bool
	}{
		{"8GiB", Memory{Bytes: 8 << 30}, true},
		{"512M", Memory{Bytes: 512 << 20}, true},
		{"50%", Memory{Percent: 50}, true},
		{" 100 % ", Memory{Percent: 100}, true},
		{"1%", Memory{Percent: 1}, true},
		{"0%", Memory{}, false},
		{"101%", Memory{}, false},
		{"2.5%", Memory{}, false},
		{"%", Memory{}, false},
		{"lots", Memory{}, false},
		{"-1G", Memory{}, false},
	} {
		got, err := ParseMemory(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseMemory(%q) = %+v, %v; want %+v, ok=%v", c.in, got, err, c.want, c.ok)
		}
		if c.ok {
			if back, err := ParseMemory(got.String()); err != nil || back != got {
				t.Errorf("ParseMemory(%q.String() = %q) = %+v, %v", c.in, got.String(), back, err)
			}
		}
	}
	if got := (Memory{Percent: 50}).Of(8 << 30); got != 4<<30 {
		t.Errorf("50%% of 8GiB = %d", got)
	}
	if got := (Memory{Bytes: 1 << 30}).Of(8 << 30); got != 1<<30 {
		t.Errorf("1GiB of 8GiB = %d", got)
	}
}

// TestLimitsDecodeAndValidate: the caps decode from sizes, percentages and
// numbers; a wrong kind of value says what the key takes; values out of
// range, and swap without memory, are refused with their origin.
func TestLimitsDecodeAndValidate(t *testing.T) {
	t.Parallel()
	p, err := Decode("ok.yaml", []byte("limits:\n  pids: 512\n  memory: 25%\n  swap: 1GiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if *p.Limits.Pids != 512 || *p.Limits.Memory != (Memory{Percent: 25}) || *p.Limits.Swap != 1<<30 {
		t.Errorf("decoded %+v", p.Limits)
	}
	if err := Validate(p); err != nil {
		t.Errorf("Validate: %v", err)
	}

	for _, c := range []struct{ src, want string }{
		{"limits:\n  memory: [1]\n", "p.yaml:2:11: limits.memory: expected a size or a percentage of the host's RAM, got a list; e.g. `memory: 8GiB`"},
		{"limits:\n  memory: 120%\n", `p.yaml:2:11: limits.memory: invalid memory "120%"`},
		{"limits:\n  pids: many\n", "p.yaml:2:9: limits.pids: expected a whole number, got a string; e.g. `pids: 3`"},
	} {
		_, err := Decode("p.yaml", []byte(c.src))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.Is(err, ErrSyntax) {
			t.Errorf("Decode(%q) = %v; want %q", c.src, err, c.want)
		}
	}

	p, err = Decode("v.yaml", []byte("limits:\n  pids: 8\n  memory: 1MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := Decode("w.yaml", []byte("limits:\n  pids: 5000000\n  swap: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    Policy
		want []string
	}{
		{p, []string{"v.yaml:2:3: limits.pids: 8 is out of range: between 32", "v.yaml:3:3: limits.memory: 1MiB is too little to start a jail (at least 32MiB)"}},
		{q, []string{"w.yaml:2:3: limits.pids: 5000000 is out of range", "w.yaml:3:3: limits.swap: needs limits.memory"}},
	} {
		err := Validate(c.p)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Validate = %v, want ErrInvalid", err)
		}
		got := strings.Split(err.Error(), "\n")
		if len(got) != len(c.want) {
			t.Errorf("got %d problems, want %d:\n%s", len(got), len(c.want), err)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], c.want[i]) {
				t.Errorf("problem %d:\n got %s\nwant %s", i, got[i], c.want[i])
			}
		}
	}
}

// TestLimitsMerge: a child profile may raise or lower its parent's caps
// (they are sized to the task and the host, like wall), never remove them:
// no value means "none".
func TestLimitsMerge(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{
		"base.yaml":  "limits:\n  pids: 4096\n  memory: 50%\n  swap: 0\n",
		"more.yaml":  "extends: base\nlimits:\n  pids: 16384\n  memory: 64GiB\n",
		"less.yaml":  "extends: base\nlimits:\n  memory: 1GiB\n",
		"none.yaml":  "extends: base\nlimits:\n  memory: unlimited\n",
		"other.yaml": "extends: base\nlimits:\n  wall: 5m\n",
	})
	for name, want := range map[string]struct {
		pids   int
		memory Memory
	}{
		"more":  {16384, Memory{Bytes: 64 << 30}},
		"less":  {4096, Memory{Bytes: 1 << 30}},
		"other": {4096, Memory{Percent: 50}},
	} {
		p, err := l.Load(name)
		if err != nil {
			t.Fatalf("Load(%s): %v", name, err)
		}
		if *p.Limits.Pids != want.pids || *p.Limits.Memory != want.memory || p.Limits.Swap == nil || *p.Limits.Swap != 0 {
			t.Errorf("Load(%s) limits %d %v %v, want %d %v 0", name, *p.Limits.Pids, p.Limits.Memory, p.Limits.Swap, want.pids, want.memory)
		}
	}
	if _, err := l.Load("none"); err == nil || !strings.Contains(err.Error(), `invalid memory "unlimited"`) {
		t.Errorf("Load(none) = %v; want the memory cap refused", err)
	}
}

// TestLimitsSchema: the schema takes what Decode and Validate take, and
// refuses what they refuse.
func TestLimitsSchema(t *testing.T) {
	t.Parallel()
	s := testutil.CompileSchema(t, SchemaJSON)
	for src, ok := range map[string]bool{
		"limits: {pids: 4096, memory: 50%, swap: 0}\n": true,
		"limits: {memory: 8GiB}\n":                     true,
		"limits: {memory: 100%}\n":                     true,
		"limits: {memory: 101%}\n":                     false,
		"limits: {memory: 0%}\n":                       false,
		"limits: {pids: 8}\n":                          false,
		"limits: {pids: 4096MiB}\n":                    false,
		"limits: {swap: 10%}\n":                        false,
	} {
		var v any
		if err := yaml.Unmarshal([]byte(src), &v); err != nil {
			t.Fatal(err)
		}
		if err := testutil.Validate(s, v); (err == nil) != ok {
			t.Errorf("schema on %q: %v, want ok=%v", strings.TrimSpace(src), err, ok)
		}
	}
}
