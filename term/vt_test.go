package term

import (
	"bytes"
	"math/rand"
	"strconv"
	"testing"
	"unicode/utf8"
)

// vt is a reference terminal parser for the tests: Paul Williams' DEC
// VT500 state machine (vt100.net/emu/dec_ansi_parser), as xterm, VTE,
// kitty and the rest implement it, on a UTF-8 stream whose U+0080..U+009F
// are C1 controls (xterm's). It notes every control string the terminal
// would act on: each OSC it would dispatch (by number, on any way out of
// the string, the worst a terminal could do) and each DCS, SOS, PM or APC
// entered. Run the Filter's output through it to learn what reached the
// operator's terminal, whatever the Filter believes.
type vt struct {
	st   vtState
	osc  []byte
	OSCs []string // the OSC strings dispatched ("52;c;QUJD")
	DCS  int      // DCS, SOS, PM, APC strings entered
}

type vtState uint8

const (
	vtGround vtState = iota
	vtEscape
	vtEscInter
	vtCSI
	vtOSC
	vtString // DCS, SOS, PM, APC
)

func (v *vt) feed(p []byte) {
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		if r == utf8.RuneError && n <= 1 {
			r = 0xfffd // a stray byte shows as a replacement character
			if p[0] < 0x80 {
				r = rune(p[0])
			}
			n = 1
		}
		v.rune(r)
		p = p[n:]
	}
}

func (v *vt) endOSC() {
	if v.st == vtOSC {
		v.OSCs = append(v.OSCs, string(v.osc))
	}
}

func (v *vt) rune(r rune) {
	// Anywhere.
	switch {
	case r == 0x18 || r == 0x1a:
		v.endOSC()
		v.st = vtGround
		return
	case r == 0x1b:
		v.endOSC()
		v.st = vtEscape
		return
	case r >= 0x80 && r <= 0x9f:
		v.endOSC()
		v.c1(r)
		return
	}
	switch v.st {
	case vtGround:
	case vtEscape:
		switch {
		case r < 0x20 || r == 0x7f: // executed or ignored, still escape
		case r >= 0x20 && r <= 0x2f:
			v.st = vtEscInter
		case r == '[':
			v.st = vtCSI
		case r == ']':
			v.st, v.osc = vtOSC, v.osc[:0]
		case r == 'P', r == 'X', r == '^', r == '_':
			v.st = vtString
			v.DCS++
		default:
			v.st = vtGround
		}
	case vtEscInter:
		if r >= 0x30 && r <= 0x7e {
			v.st = vtGround
		}
	case vtCSI:
		if r >= 0x40 && r <= 0x7e {
			v.st = vtGround
		}
	case vtOSC:
		switch {
		case r == 0x07:
			v.endOSC()
			v.st = vtGround
		case r >= 0x20:
			v.osc = utf8.AppendRune(v.osc, r)
		}
	case vtString:
		// Until ST, CAN, SUB (above) or, for SOS/PM/APC in xterm, BEL.
		if r == 0x07 {
			v.st = vtGround
		}
	}
}

func (v *vt) c1(r rune) {
	switch r {
	case 0x90, 0x98, 0x9e, 0x9f:
		v.st = vtString
		v.DCS++
	case 0x9b:
		v.st = vtCSI
	case 0x9d:
		v.st, v.osc = vtOSC, v.osc[:0]
	default:
		v.st = vtGround
	}
}

// acted returns what of the terminal's actions the Filter should have kept
// off it: OSCs other than the allowed ones, and any DCS, SOS, PM or APC.
func (v *vt) acted(allow func(int) bool) []string {
	var bad []string
	for _, s := range v.OSCs {
		num, _, _ := bytes.Cut([]byte(s), []byte(";"))
		n, err := strconv.Atoi(string(num))
		if err != nil || !allow(n) {
			bad = append(bad, "OSC "+strconv.Quote(s))
		}
	}
	if v.DCS > 0 {
		bad = append(bad, strconv.Itoa(v.DCS)+" DCS/SOS/PM/APC")
	}
	return bad
}

// TestFilterAgainstATerminal: what the Filter passes, read by a terminal's
// own parser, holds no OSC but the allowed ones and no DCS, APC, PM or
// SOS: a byte a terminal ignores or executes inside an escape sequence
// (ESC ESC, ESC BEL, ESC DEL, a C1 after ESC) must not make the Filter
// pass a lone ESC whose sequence the following plain text completes.
func TestFilterAgainstATerminal(t *testing.T) {
	t.Parallel()
	const clip = "]52;c;QUJD\x07"
	cases := []string{
		"\x1b\x1b]0\x1b\\" + clip,      // ESC ESC: one ESC passed, its sequence dropped
		"\x1b\x1bP\x1b\\" + clip,       // the same with a DCS
		"\x1b\x07" + clip,              // BEL inside ESC, executed: still in ESC
		"\x1b\r" + clip,                // CR likewise
		"\x1b\x7f" + clip,              // DEL, ignored: still in ESC
		"\x1b\x9d52;c;QUJD\x07",        // a raw C1 OSC after ESC
		"\x1b\xc2\x9d52;c;QUJD\x07",    // a C1 OSC in UTF-8 after ESC
		"\x1b[1\x7f\x1b]52;c;QUJD\x07", // DEL inside CSI
		"\x1b]0;t\x1b\x1b" + clip,      // ESC ESC inside a title
		"\x1b]52;c;\x1b\x1b" + clip,    // and inside a dropped string
		"a\x1b]0;x\x07b",               // control: a title passes
	}
	for _, in := range cases {
		for _, size := range []int{1, 3, 1 << 20} {
			_, got := filterAll(t, []byte(in), false, func() int { return size })
			var v vt
			v.feed(got)
			if bad := v.acted(AllowedStrings); len(bad) > 0 {
				t.Errorf("writes of %d: %q -> %q: the terminal acts on %v", size, in, got, bad)
			}
		}
	}
}

// TestFilterAgainstATerminalAtRandom: the same over short streams of the
// bytes that matter to a terminal's parser, cut at random.
func TestFilterAgainstATerminalAtRandom(t *testing.T) {
	t.Parallel()
	alphabet := []byte("\x1b\x07\x18\x1a\x7f\x0e\r\n[]P_^X\\;?052c(#\xc2\x9d\x9c\x90\x9b\xe2\x80\x94a ")
	r := rand.New(rand.NewSource(2))
	for range 100000 {
		in := make([]byte, 1+r.Intn(24))
		for j := range in {
			in[j] = alphabet[r.Intn(len(alphabet))]
		}
		size := 1 + r.Intn(5)
		_, got := filterAll(t, in, false, func() int { return size })
		var v vt
		v.feed(got)
		if bad := v.acted(AllowedStrings); len(bad) > 0 {
			t.Fatalf("%q -> %q: the terminal acts on %v", in, got, bad)
		}
	}
}

// FuzzFilter: whatever the jail writes, a terminal acts on no control
// string the Filter should have kept off, and the Filter does not panic.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{"\x1b\x1b]52;c;QUJD\x07", "\x1b]0;t\x07", "\x1bP\x1b\\", "\xc2\x9d52;c;x\x07", "\x1b[?1049h"} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, size uint8) {
		var out bytes.Buffer
		flt := NewFilter(&out, false)
		for p := in; len(p) > 0; {
			n := min(int(size)+1, len(p))
			flt.Write(p[:n])
			p = p[n:]
		}
		var v vt
		v.feed(out.Bytes())
		if bad := v.acted(AllowedStrings); len(bad) > 0 {
			t.Errorf("%q -> %q: the terminal acts on %v", in, out.Bytes(), bad)
		}
	})
}
