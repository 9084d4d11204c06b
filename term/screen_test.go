package term

import (
	"bytes"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// filterAll runs in through a Filter in writes of chunk() bytes.
func filterAll(t *testing.T, in []byte, clipboard bool, chunk func() int) (*Filter, []byte) {
	t.Helper()
	var out bytes.Buffer
	f := NewFilter(&out, clipboard)
	for len(in) > 0 {
		n := min(chunk(), len(in))
		if got, err := f.Write(in[:n]); got != n || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", got, err, n)
		}
		in = in[n:]
	}
	return f, out.Bytes()
}

// TestFilterDropsControlStrings: every form of a clipboard write or read,
// and the other strings a terminal would act on, is dropped, split
// anywhere; titles, hyperlinks and text pass untouched.
func TestFilterDropsControlStrings(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"a\x1b]52;c;QUJD\x07b", "ab"},
		{"a\x1b]52;c;QUJD\x1b\\b", "ab"},
		{"a\x1b]52;c;?\x07b", "ab"},                        // a read: the answer would go into the jail
		{"a\xc2\x9d52;c;QUJD\xc2\x9cb", "ab"},              // C1 in UTF-8
		{"a\x9d52;c;QUJD\x9cb", "ab"},                      // raw C1
		{"a\x1bPtmux;\x1b\x1b]52;c;QUJD\x07\x1b\\b", "ab"}, // tmux's passthrough (Claude Code's form)
		{"a\x1bP\x1b]52;c;QUJD\x07\x1b\\b", "ab"},          // screen's
		{"a\x1b]1337;File=x:QUJD\x07b", "ab"},              // iTerm2: a file on the operator's disk
		{"a\x1b]9;spoofed\x07b", "ab"},                     // a notification
		{"\x1b_Gf=100,t=f;L2V0Yy9wYXNzd2Q=\x1b\\x", "x"},   // kitty graphics reading a file
		{"a\x1b]52", "a"},                                  // unterminated at the end: dropped
		{"a\x1b]0;title\x07b", "a\x1b]0;title\x07b"},       // a title passes
		{"a\x1b]8;;http://x\x1b\\l\x1b]8;;\x1b\\b", "a\x1b]8;;http://x\x1b\\l\x1b]8;;\x1b\\b"},
		{"a\x1b]0;ti\xc3\xa9\x1b\\b", "a\x1b]0;ti\xc3\xa9\x1b\\b"},
		{"a\x1b]52;c;AAAA\x1b[31mred", "a\x1b[31mred"},         // ESC ends the string, and the next sequence is read
		{"a\x1b]0;x\xc2\x9d52;c;QUJD\x07b", "a\x1b]0;x\x07b"},  // a C1 OSC inside a title ends the title
		{"a\x1b]0;x\x1b]52;c;QUJD\x07b", "a\x1b]0;x\x07b"},     // so does ESC ]
		{"a\x1b]0;x\x9d52;c;QUJD\x07b", "a\x1b]0;x\x07b"},      // and a raw C1
		{"a\x1b]0;x\nb", "a\x1b]0;x\x07\nb"},                   // a C0 control ends a title
		{"é\xc2\xa0ü日本\x1b[?1049h", "é\xc2\xa0ü日本\x1b[?1049h"}, // text and control sequences pass
		{"\x1b[1;31mred\x1b[0m\r\n", "\x1b[1;31mred\x1b[0m\r\n"},
	}
	for _, c := range cases {
		for _, size := range []int{1, 2, 3, 7, 1 << 20} {
			_, got := filterAll(t, []byte(c.in), false, func() int { return size })
			if string(got) != c.want {
				t.Errorf("writes of %d: %q -> %q, want %q", size, c.in, got, c.want)
			}
		}
	}
}

// TestFilterAllowsTheClipboardWhenAsked: --allow-clipboard passes OSC 52
// writes, and still no read and nothing else.
func TestFilterAllowsTheClipboardWhenAsked(t *testing.T) {
	t.Parallel()
	f, got := filterAll(t, []byte("a\x1b]52;c;QUJD\x07b\x1b]1337;File=x\x07c\x1b]52;c;?\x07d\x1b]52;;QUJD\x1b\\e"), true, func() int { return 1 })
	if string(got) != "a\x1b]52;c;QUJD\x07bcd\x1b]52;;QUJD\x1b\\e" || f.Seen.Dropped != 2 {
		t.Errorf("got %q, %d dropped", got, f.Seen.Dropped)
	}
}

// TestFilterSplitsDoNotMatter: the output is the same however the stream
// is cut into writes.
func TestFilterSplitsDoNotMatter(t *testing.T) {
	t.Parallel()
	in := bytes.Repeat([]byte("text é \x1b[1mbold\x1b[0m \x1b]52;c;"+strings.Repeat("QUJD", 1000)+"\x07 \x1b]0;t\x07 \xc2\x9d52;c;QUJD\xc2\x9c"), 50)
	_, want := filterAll(t, in, false, func() int { return len(in) })
	if bytes.Contains(want, []byte("52;")) || bytes.Contains(want, []byte("QUJD")) {
		t.Fatal("a clipboard write came through")
	}
	r := rand.New(rand.NewSource(1))
	for range 200 {
		if _, got := filterAll(t, in, false, func() int { return 1 + r.Intn(64) }); !bytes.Equal(got, want) {
			t.Fatal("another split changed the output")
		}
	}
}

// TestFilterReset: what the output left set decides the reset.
func TestFilterReset(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in        string
		has, hasn []string
	}{
		{"plain text\r\n", nil, []string{"\x1b"}},
		{"\x1b[?1049h\x1b[?25l\x1b[?1000h\x1b[8m", []string{"\x1b[?1049l", ScreenReset}, []string{"\x18", "\x1b[?6l"}},
		{"\x1b[?1049h\x1b[?1049l", []string{ScreenReset}, []string{"\x1b[?1049l"}},
		{"\x1b[?1000;1049h\x1b[?6h\x1b[5 q", []string{"\x1b[?1049l", "\x1b[?6l", "\x1b[0 q"}, nil},
		{"\x1b]11;#000000\x07\x1b]4;1;red\x07", []string{"\x1b]111\x1b\\", "\x1b]104\x1b\\"}, []string{"\x1b]110"}},
		{"\x0ebox", []string{ScreenReset}, nil},                           // SO alone
		{"\x1b[38;5", []string{ScreenReset}, []string{"\x18"}},            // cut inside a sequence, which was held back
		{"\x1b]0;half a title", []string{"\x18\x1b<" + ScreenReset}, nil}, // inside a title
	}
	for _, c := range cases {
		f, _ := filterAll(t, []byte(c.in), false, func() int { return 3 })
		r := f.Reset()
		for _, s := range c.has {
			if !strings.Contains(r, s) {
				t.Errorf("%q: reset %q lacks %q", c.in, r, s)
			}
		}
		for _, s := range c.hasn {
			if strings.Contains(r, s) {
				t.Errorf("%q: reset %q has %q", c.in, r, s)
			}
		}
	}
}

// TestEscapes: ~. and ~? after Enter or at the start; ~~ is one ~; a ~
// elsewhere, or before anything else, passes.
func TestEscapes(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, out, cmds string }{
		{"~.", "", "."},
		{"ls\r~.", "ls\r", "."},
		{"ls~.", "ls~.", ""},
		{"~~.", "~.", ""},
		{"~?x", "x", "?"},
		{"~x", "~x", ""},
		{"a\n~?\r~.", "a\n\r", "?."},
		{"~\r~.", "~\r", "."},
	}
	for _, c := range cases {
		for _, size := range []int{1, 100} {
			var e Escapes
			var out, cmds []byte
			in := []byte(c.in)
			for len(in) > 0 {
				n := min(size, len(in))
				out = e.Input(out, in[:n], func(cmd byte) { cmds = append(cmds, cmd) })
				in = in[n:]
			}
			if string(out) != c.out || string(cmds) != c.cmds {
				t.Errorf("%q in writes of %d: passed %q, commands %q; want %q, %q", c.in, size, out, cmds, c.out, c.cmds)
			}
		}
	}
}

func BenchmarkFilter(b *testing.B) {
	chunk := bytes.Repeat([]byte("\x1b[38;5;174m╭───\x1b[6GClaude\x1b[13GCode plain ascii text here\r\n"), 600)
	f := NewFilter(discard{}, false)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		f.Write(chunk)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestScreenResetUndoesWhatAnAgentStacks: a keyboard protocol pushed
// several times (kitty's, CSI > flags u) is popped whole, and a keyboard
// the agent locked (KAM, CSI 2 h, which xterm honours) is unlocked: either
// would leave the operator's shell unusable after the run.
func TestScreenResetUndoesWhatAnAgentStacks(t *testing.T) {
	t.Parallel()
	f, _ := filterAll(t, []byte(strings.Repeat("\x1b[>1u", 8)+"\x1b[2h"), false, func() int { return 5 })
	r := f.Reset()
	popped := 0
	for _, m := range regexp.MustCompile(`\x1b\[<(\d*)u`).FindAllStringSubmatch(r, -1) {
		n := 1
		if m[1] != "" {
			n, _ = strconv.Atoi(m[1])
		}
		popped += n
	}
	if popped < 8 {
		t.Errorf("the reset pops %d keyboard modes of 8 pushed: %q", popped, r)
	}
	if !strings.Contains(r, "\x1b[2l") {
		t.Errorf("the reset leaves the keyboard locked: %q", r)
	}
	// VT52 mode (CSI ? 2 l) reads every sequence after it as VT52's: the
	// reset begins by leaving it (ESC <, which ANSI mode ignores).
	f, _ = filterAll(t, []byte("\x1b[?1049h\x1b[?2l"), false, func() int { return 1 })
	if r := f.Reset(); !strings.HasPrefix(r, "\x1b<") {
		t.Errorf("the reset does not leave VT52 mode first: %q", r)
	}
}

// TestFilterDropsTitleReports: CSI 20 t and CSI 21 t make a terminal that
// honours them type the icon label or the window title, which the agent
// sets (OSC 0-2), into agentjail's stdin; one written as the agent exits
// is read by the operator's shell after the run. Both are dropped, however
// written (padded, split); the other control sequences pass as they are.
func TestFilterDropsTitleReports(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"a\x1b]2;rm -rf ~\x07\x1b[21tb", "a\x1b]2;rm -rf ~\x07b"},
		{"a\x1b[20tb", "ab"},
		{"a\x1b[0021;0tb", "ab"},
		{"a\x9b21tb", "ab"},
		{"a\xc2\x9b21tb", "ab"},
		{"a\x1b[22;0t\x1b[23;0tb", "a\x1b[22;0t\x1b[23;0tb"}, // push and pop the title: no report
		{"a\x1b[18tb\x1b[?21t", "a\x1b[18tb\x1b[?21t"},
		{"\x1b[1;31mred\x1b[0m", "\x1b[1;31mred\x1b[0m"},
		{"\x1b[" + strings.Repeat("0;", 300) + "21t", ""}, // too long to read: dropped
	}
	for _, c := range cases {
		for _, size := range []int{1, 2, 5, 1 << 20} {
			_, got := filterAll(t, []byte(c.in), false, func() int { return size })
			if string(got) != c.want {
				t.Errorf("writes of %d: %q -> %q, want %q", size, c.in, got, c.want)
			}
		}
	}
}

// TestFilterDropsKeyboardModes: the ANSI modes that take the keyboard from
// the operator are never set or reset by the agent: KAM (CSI 2 h locks the
// keyboard in xterm, so that not even ~. could be typed) and SRM (CSI 12
// h/l, local echo: a password typed later would show). Other modes, and
// the private ones with the same numbers (CSI ? 12 h, cursor blinking),
// pass.
func TestFilterDropsKeyboardModes(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"a\x1b[2hb", "ab"},
		{"a\x1b[12lb", "ab"},
		{"a\x1b[12hb", "ab"},
		{"a\x1b[4;12hb", "ab"}, // mixed with another: all dropped
		{"a\x1b[4hb\x1b[4l", "a\x1b[4hb\x1b[4l"},
		{"a\x1b[?12h\x1b[?2lb", "a\x1b[?12h\x1b[?2lb"},
	}
	for _, c := range cases {
		for _, size := range []int{1, 1 << 20} {
			_, got := filterAll(t, []byte(c.in), false, func() int { return size })
			if string(got) != c.want {
				t.Errorf("writes of %d: %q -> %q, want %q", size, c.in, got, c.want)
			}
		}
	}
}

// TestFilterFastPathsAreStep: the runs Filter passes or holds without
// step (plain ASCII and whole UTF-8 characters from ground, a control
// sequence's parameters) come out exactly as step, one byte at a time,
// would have them, however the input is split: random streams of the
// bytes that matter (ESC, the C1 controls raw and in UTF-8, UTF-8 leads
// and continuations whole and broken, sequence bytes, text).
func TestFilterFastPathsAreStep(t *testing.T) {
	t.Parallel()
	pieces := [][]byte{
		[]byte("\x1b"), []byte("["), []byte("]"), []byte("52;c;"), []byte("0;title"), []byte("\x07"), []byte("\x1b\\"),
		[]byte("38;5;174m"), []byte("?1049h"), []byte("2h"), []byte("21t"), []byte("m"), []byte("P"), []byte("\x0e"),
		[]byte("╭───"), []byte("é"), []byte("\xc2\xa0"), []byte("\xc2\x9b"), []byte("\xc2\x9d"), []byte("\xc2"), []byte("\x9b"),
		[]byte("\x9d"), []byte("\x90"), []byte("\x9c"), []byte("\xe2\x94"), []byte("\xf0\x9f\x98\x80"), []byte("\xf0\x9f"),
		[]byte("\xff"), []byte("\x80"), []byte("plain text "), []byte("\r\n"), []byte("\x18"), []byte("\x7f"),
		bytes.Repeat([]byte("1;"), maxParams/2), []byte("9"), []byte(" q"),
	}
	rng := rand.New(rand.NewSource(2))
	// A control sequence of as many parameters as are held, and one more.
	long := [][]byte{append(append([]byte("\x1b["), bytes.Repeat([]byte("1"), maxParams)...), 'm'),
		append(append([]byte("\x1b["), bytes.Repeat([]byte("1"), maxParams+1)...), 'm')}
	for k := range 5000 {
		var in []byte
		if k < len(long) {
			in = long[k]
		}
		for range rng.Intn(60) {
			in = append(in, pieces[rng.Intn(len(pieces))]...)
		}
		for i, clipboard := range []bool{false, true} {
			split := func() int { return 1 + rng.Intn(40) }
			if i == 0 {
				split = func() int { return len(in) } // one write: the fast paths see whole runs
			}
			f, got := filterAll(t, in, clipboard, split)
			ref := NewFilter(nil, clipboard)
			var want []byte
			for _, b := range in {
				want = ref.step(want, b)
			}
			if !bytes.Equal(got, want) || f.Seen != ref.Seen || f.st != ref.st {
				t.Fatalf("input %q (clipboard %v):\n got %q %+v\nwant %q %+v", in, clipboard, got, f.Seen, want, ref.Seen)
			}
		}
	}
}
