package term

import (
	"io"
	"slices"
	"strconv"
	"unicode/utf8"
)

// ScreenReset puts back what a program may leave set on a terminal and
// that no cursor motion or clearing is needed to undo; it is written after
// a run whose output reached the terminal with escape sequences in it,
// before agentjail's own messages. Every sequence in it is harmless where
// the mode was never set, and terminals ignore those they do not know:
//
//	CSI ?2026l          end a synchronized update (a terminal stops drawing until it times out)
//	CSI ?1l  ESC >      normal cursor keys, numeric keypad
//	CSI ?9l … ?1016l    mouse reporting, every protocol and encoding
//	CSI ?1004l ?2004l ?2031l  focus events, bracketed paste, colour-scheme reports
//	CSI <64u  CSI >4m   kitty keyboard protocol popped (the whole stack: an agent may push many), xterm's modifyOtherKeys off
//	CSI 2l  CSI 4l  CSI ?7h  keyboard unlocked (KAM, which xterm honours), insert mode off, autowrap on
//	ESC 7 CSI r ESC 8   the scrolling region reset without moving the cursor
//	CSI ?25h            cursor visible
//	ESC ( B  ESC ) B  SI  CSI 0m  character sets (G0, G1, shifted in) and attributes (after ESC 8, which restores saved ones)
//	OSC 8 ;; ST         a hyperlink left open closed
//
// Claude Code writes most of it on its own way out; a killed TUI writes
// none.
const ScreenReset = "\x1b[?2026l\x1b[?1l\x1b>" +
	"\x1b[?9l\x1b[?1000l\x1b[?1001l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1016l" +
	"\x1b[?1004l\x1b[?2004l\x1b[?2031l" +
	"\x1b[<64u\x1b[>4m" +
	"\x1b[2l\x1b[4l\x1b[?7h" +
	"\x1b7\x1b[r\x1b8" +
	"\x1b[?25h" +
	"\x1b(B\x1b)B\x0f\x1b[0m" +
	"\x1b]8;;\x1b\\"

// AllowedStrings are the OSC numbers a Filter passes: titles (0, 1, 2),
// colours (4, 10, 11, 12 and their resets 104, 110-112), the working
// directory (7), hyperlinks (8) and shell-integration marks (133). Every
// other OSC is dropped: clipboard writes and reads (52; a terminal answers
// the read on agentjail's stdin, which goes into the jail), iTerm2's file
// transfers (1337), kitty's (5113, 5522), fonts (50), notifications (9,
// 99, 777) and whatever a terminal adds next. DCS, APC, PM and SOS strings
// are all dropped (kitty's graphics protocol reads files by path).
func AllowedStrings(n int) bool {
	switch n {
	case 0, 1, 2, 4, 7, 8, 10, 11, 12, 104, 110, 111, 112, 133:
		return true
	}
	return false
}

// Clipboard is OSC 52, the system clipboard: its writes pass only when
// the operator allows them (--allow-clipboard), its reads never.
const Clipboard = 52

// state is where a Filter stands in the terminal's parsing of the stream.
type state uint8

const (
	ground   state = iota
	esc            // ESC seen
	c2             // 0xC2 seen: maybe a C1 control in UTF-8
	csi            // inside a control sequence, held back until its final byte
	csiDrop        // inside a control sequence too long to hold: dropped
	oscNum         // an OSC's introducer and number, held back until its fate is known
	clipSel        // an allowed OSC 52's selection, held back: a read ('?') is dropped
	clipData       // its first byte of data is next
	oscPass        // inside an allowed OSC
	passEsc        // ESC inside an allowed OSC: ST when '\' follows
	drop           // inside a dropped string
	dropEsc        // ESC inside a dropped string
	dropC2         // 0xC2 inside a dropped string
)

// maxParams bounds the parameters and intermediates of a control sequence
// a Filter holds back until its final byte; a longer one is dropped whole.
const maxParams = 256

// Filter is an io.Writer to a terminal that passes what a jailed program
// writes except the control strings a terminal would act on to the
// operator's harm (AllowedStrings), and notes the modes left set that
// ScreenReset cannot blindly undo. It keeps its state across writes, so a
// string split over many writes (one byte each) is dropped whole.
//
// Two rules keep it safe whatever the terminal's parser:
//   - an allowed OSC is ended by the filter no later than any terminal
//     would end it: only printable ASCII and UTF-8 from U+00A0 pass inside
//     it; any other byte (a C0 control, ESC not followed by '\', a C1
//     control in either encoding) makes the filter end the string with BEL
//     and read that byte afresh, so no clipboard write hides in a title;
//   - a dropped string is dropped until its terminator (BEL for OSC, ST,
//     CAN, SUB; ESC ESC is a literal ESC inside DCS, tmux's passthrough),
//     so the only failure is to drop too much.
//
// Introducers are recognised in 7 bits (ESC ] P _ ^ X), as UTF-8 C1
// (C2 9D) and as raw C1 (9D), since a terminal may honour any.
type Filter struct {
	w     io.Writer
	allow func(n int) bool

	st       state
	dcs      bool // the dropped string is a DCS
	num      int
	held     []byte // an OSC's introducer and digits
	cont     int    // UTF-8 continuation bytes still expected
	utf      []byte // a partial UTF-8 character inside an allowed OSC
	csiIntro []byte // the current control sequence's introducer (ESC [, CSI)
	params   []byte // and its parameters and intermediates
	buf      []byte
	joined   bool // a Join'ed stream ended inside a sequence

	// Seen is what the output has done to the terminal so far.
	Seen Seen
}

// Seen is what a Filter saw the stream do to the terminal.
type Seen struct {
	// Escapes: the output held an escape sequence, a C1 control or SO;
	// without any, the terminal's state is untouched and nothing is reset.
	Escapes bool
	// AltScreen: the alternate screen was entered and not left (modes
	// 1049, 1047, 47); OriginMode: DECOM set (6); CursorStyle: DECSCUSR
	// used; Colours: the palette or the default colours changed (OSC 4,
	// 10, 11, 12). Each is reset only when seen: leaving the alternate
	// screen restores the saved cursor (xterm), and resetting DECOM homes it.
	AltScreen, OriginMode, CursorStyle bool
	Colours                            [4]bool // OSC 4, 10, 11, 12
	// Dropped counts the control strings dropped.
	Dropped int
}

// NewFilter returns a Filter writing to w; clipboard allows OSC 52 too.
func NewFilter(w io.Writer, clipboard bool) *Filter {
	allow := AllowedStrings
	if clipboard {
		allow = func(n int) bool { return n == Clipboard || AllowedStrings(n) }
	}
	return &Filter{w: w, allow: allow}
}

// Write passes p on, filtered. It reports len(p) when everything it had
// to write was written.
func (f *Filter) Write(p []byte) (int, error) {
	f.buf = f.filter(f.buf[:0], p)
	if len(f.buf) == 0 {
		return len(p), nil
	}
	if _, err := f.w.Write(f.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Reset returns what to write to the terminal once the output has ended:
// "" when it held no escape at all; otherwise CAN when it ended inside a
// sequence (which ends any in every terminal), ESC < (out of VT52 mode),
// the resets of the modes seen set, and ScreenReset.
func (f *Filter) Reset() string {
	s := f.Seen
	if !s.Escapes {
		return ""
	}
	var out []byte
	if f.inside() || f.joined {
		out = append(out, 0x18)
	}
	// ESC < leaves VT52 mode (CSI ? 2 l), which would read every reset
	// below as VT52's; ANSI mode ignores it.
	out = append(out, "\x1b<"...)
	if s.AltScreen {
		out = append(out, "\x1b[?1049l"...)
	}
	if s.OriginMode {
		out = append(out, "\x1b[?6l"...)
	}
	if s.CursorStyle {
		out = append(out, "\x1b[0 q"...)
	}
	for i, n := range []int{104, 110, 111, 112} {
		if s.Colours[i] {
			out = append(append(append(out, "\x1b]"...), strconv.Itoa(n)...), "\x1b\\"...)
		}
	}
	return string(append(out, ScreenReset...))
}

// inside reports whether the terminal was left inside a sequence or a
// string the filter passed on (of one it held back or dropped, nothing
// reached it).
func (f *Filter) inside() bool {
	switch f.st {
	case oscPass, passEsc:
		return true
	}
	return false
}

// Join adds what o saw to f's account, for two streams to one terminal
// (stdout and stderr): f's Reset then resets what either left set.
func (f *Filter) Join(o *Filter) {
	s, t := &f.Seen, o.Seen
	s.Escapes, s.AltScreen, s.OriginMode, s.CursorStyle = s.Escapes || t.Escapes, s.AltScreen || t.AltScreen, s.OriginMode || t.OriginMode, s.CursorStyle || t.CursorStyle
	for i := range s.Colours {
		s.Colours[i] = s.Colours[i] || t.Colours[i]
	}
	f.joined = f.joined || o.inside() || o.joined
}

// filter appends p, filtered, to dst.
func (f *Filter) filter(dst, p []byte) []byte {
	for i := 0; i < len(p); {
		if f.st == ground && f.cont == 0 {
			// A run of plain ASCII, and of whole UTF-8 characters that are
			// not C1 controls, passes as it is (as step would pass it).
			j := i
			for j < len(p) {
				if c := p[j]; c < 0x80 {
					if c == 0x1b || c == 0x0e {
						break
					}
					j++
				} else if n := plainChar(p[j:]); n > 0 {
					j += n
				} else {
					break
				}
			}
			if j > i {
				dst = append(dst, p[i:j]...)
				i = j
				continue
			}
		}
		if f.st == ground && f.cont == 0 {
			// A whole control sequence, ESC [ parameters final, as step
			// would take it byte by byte.
			if n := wholeCSI(p[i:]); n > 0 {
				seq := p[i : i+n]
				f.Seen.Escapes = true
				if final, params := seq[n-1], seq[2:n-1]; withheld(final, params) {
					f.Seen.Dropped++
				} else {
					f.track(final, params)
					dst = append(dst, seq...)
				}
				i += n
				continue
			}
		}
		if f.st == csi {
			// A run of parameter bytes is held as it is.
			j := i
			for j < len(p) && p[j] >= 0x20 && p[j] <= 0x3f && len(f.params)+j-i < maxParams {
				j++
			}
			if j > i {
				f.params = append(f.params, p[i:j]...)
				i = j
				continue
			}
		}
		dst = f.step(dst, p[i])
		i++
	}
	return dst
}

// wholeCSI is the length of the control sequence ESC [ P... F that p
// starts with, when p holds it whole and its parameters (0x20..0x3F) fit
// the held ones (maxParams); 0 otherwise.
func wholeCSI(p []byte) int {
	if len(p) < 3 || p[0] != 0x1b || p[1] != '[' {
		return 0
	}
	for j := 2; j < len(p) && j-2 <= maxParams; j++ {
		switch c := p[j]; {
		case c >= 0x20 && c <= 0x3f:
		case c >= 0x40 && c <= 0x7e:
			return j + 1
		default:
			return 0
		}
	}
	return 0
}

// plainChar is the length of the UTF-8 character p starts with when it is
// whole, valid and no C1 control (U+0080..U+009F), 0 otherwise: what step
// passes unchanged, one byte at a time, from ground. (step passes more,
// broken characters too; those it is left to.)
func plainChar(p []byte) int {
	r, n := utf8.DecodeRune(p)
	if r == utf8.RuneError || r >= 0x80 && r <= 0x9f {
		return 0
	}
	return n
}

// c1String reports whether the C1 control b starts a string a terminal
// reads to its terminator: DCS (0x90), SOS (0x98), PM (0x9E), APC (0x9F).
// OSC (0x9D) is decided apart.
func c1String(b byte) (ok, dcs bool) {
	switch b {
	case 0x90:
		return true, true
	case 0x98, 0x9e, 0x9f:
		return true, false
	}
	return false, false
}

func (f *Filter) startDrop(dcs bool) {
	f.st, f.dcs = drop, dcs
	f.Seen.Dropped++
}

func (f *Filter) startOSC(intro ...byte) {
	f.Seen.Escapes = true
	f.st, f.num, f.held = oscNum, 0, append(f.held[:0], intro...)
}

func (f *Filter) startCSI(dst []byte, intro ...byte) []byte {
	f.Seen.Escapes = true
	f.st, f.params, f.csiIntro = csi, f.params[:0], append(f.csiIntro[:0], intro...)
	return dst
}

// step reads one byte and appends what of it passes.
func (f *Filter) step(dst []byte, b byte) []byte {
	switch f.st {
	case ground:
		if f.cont > 0 {
			if b >= 0x80 && b <= 0xbf {
				f.cont--
				return append(dst, b)
			}
			f.cont = 0 // a broken character: b is read afresh
		}
		switch {
		case b == 0x1b:
			f.st = esc
			f.Seen.Escapes = true
			return dst
		case b == 0x0e:
			f.Seen.Escapes = true // SO: the G1 character set
		case b == 0xc2:
			f.st = c2
			return dst
		case b == 0x9d:
			f.startOSC(b)
			return dst
		case b == 0x9b:
			return f.startCSI(dst, b)
		case b >= 0xc3 && b <= 0xdf:
			f.cont = 1
		case b >= 0xe0 && b <= 0xef:
			f.cont = 2
		case b >= 0xf0 && b <= 0xf4:
			f.cont = 3
		}
		if ok, dcs := c1String(b); ok {
			f.Seen.Escapes = true
			f.startDrop(dcs)
			return dst
		}
		return append(dst, b)
	case c2:
		f.st = ground
		switch {
		case b == 0x9d:
			f.startOSC(0xc2, b)
			return dst
		case b == 0x9b:
			return f.startCSI(dst, 0xc2, b)
		}
		if ok, dcs := c1String(b); ok {
			f.Seen.Escapes = true
			f.startDrop(dcs)
			return dst
		}
		if b >= 0x80 && b <= 0xbf {
			return append(dst, 0xc2, b)
		}
		return f.step(append(dst, 0xc2), b)
	case esc:
		f.st = ground
		switch b {
		case ']':
			f.startOSC(0x1b, b)
			return dst
		case '[':
			return f.startCSI(dst, 0x1b, b)
		case 'P':
			f.startDrop(true)
			return dst
		case 'X', '^', '_':
			f.startDrop(false)
			return dst
		}
		// What a terminal does with b after ESC (the VT500 parser, which
		// xterm, VTE and kitty follow): the Filter must neither pass the
		// ESC alone nor leave the terminal in an escape sequence it
		// believes over, or plain text that follows (`]52;c;…`) would
		// complete a sequence the Filter never saw.
		switch {
		case b == 0x1b: // a new ESC: the first is lost
			f.st = esc
			return dst
		case b == 0x18 || b == 0x1a: // CAN, SUB: the ESC is cancelled
			return append(dst, b)
		case b < 0x20: // a C0 control is executed, and the ESC still waits
			f.st = esc
			return append(dst, b)
		case b == 0x7f: // DEL is ignored
			f.st = esc
			return dst
		case b >= 0x80: // a C1 control (raw or UTF-8) or a character ends it
			return f.step(dst, b)
		}
		return append(dst, 0x1b, b)
	case csi, csiDrop:
		// A control sequence is held back until its final byte decides
		// it (titleReport); the terminal has seen none of it meanwhile.
		switch {
		case b >= 0x20 && b <= 0x3f:
			if f.st == csi && len(f.params) == maxParams {
				f.st = csiDrop
				f.Seen.Dropped++
			}
			if f.st == csi {
				f.params = append(f.params, b)
			}
			return dst
		case b >= 0x40 && b <= 0x7e:
			held := f.st == csi
			f.st = ground
			if !held {
				return dst
			}
			if withheld(b, f.params) {
				f.Seen.Dropped++
				return dst
			}
			f.track(b, f.params)
			return append(append(append(dst, f.csiIntro...), f.params...), b)
		case b == 0x18 || b == 0x1a:
			f.st = ground // CAN and SUB cancel the sequence
			return append(dst, b)
		case b == 0x7f:
			return dst // ignored inside the sequence
		case b < 0x20 && b != 0x1b:
			return append(dst, b) // executed inside the sequence
		}
		f.st = ground // ESC, C1, UTF-8 end it: read afresh
		return f.step(dst, b)
	case oscNum:
		if b >= '0' && b <= '9' && len(f.held) < 12 {
			f.num = f.num*10 + int(b-'0')
			f.held = append(f.held, b)
			return dst
		}
		if last := f.held[len(f.held)-1]; b == ';' && last >= '0' && last <= '9' && f.allow(f.num) {
			if f.num == Clipboard {
				f.st, f.held = clipSel, append(f.held, b)
				return dst
			}
			f.st, f.cont = oscPass, 0
			switch f.num {
			case 4:
				f.Seen.Colours[0] = true
			case 10, 11, 12:
				f.Seen.Colours[f.num-9] = true
			}
			return append(append(dst, f.held...), b)
		}
		f.startDrop(false)
		return f.step(dst, b)
	case clipSel:
		switch {
		case (b >= 'a' && b <= 'z' || b >= '0' && b <= '9') && len(f.held) < 24:
			f.held = append(f.held, b)
			return dst
		case b == ';':
			f.st, f.held = clipData, append(f.held, b)
			return dst
		}
		f.startDrop(false)
		return f.step(dst, b)
	case clipData:
		if b == '?' {
			// A read: the terminal would answer with the clipboard on
			// agentjail's stdin, which goes into the jail.
			f.startDrop(false)
			return dst
		}
		f.st, f.cont = oscPass, 0
		return f.stepPass(append(dst, f.held...), b)
	case oscPass:
		return f.stepPass(dst, b)
	case passEsc:
		f.st = ground
		if b == '\\' {
			return append(dst, 0x1b, b)
		}
		// ESC x ends the OSC (xterm), and x begins a sequence.
		return f.step(f.step(append(dst, 0x07), 0x1b), b)
	}
	return f.stepDrop(dst, b)
}

// stepPass reads a byte inside an allowed OSC.
func (f *Filter) stepPass(dst []byte, b byte) []byte {
	if f.cont > 0 {
		if b < 0x80 || b > 0xbf {
			return f.endPass(dst, append(f.utf, b))
		}
		f.utf = append(f.utf, b)
		if f.cont--; f.cont > 0 {
			return dst
		}
		if f.utf[0] == 0xc2 && f.utf[1] < 0xa0 { // U+0080..U+009F: a C1 control
			return f.endPass(dst, f.utf)
		}
		return append(dst, f.utf...)
	}
	switch {
	case b == 0x07:
		f.st = ground
		return append(dst, b)
	case b >= 0x20 && b <= 0x7e:
		return append(dst, b)
	case b == 0x1b:
		f.st = passEsc
		return dst
	case b >= 0xc2 && b <= 0xdf:
		f.cont, f.utf = 1, append(f.utf[:0], b)
		return dst
	case b >= 0xe0 && b <= 0xef:
		f.cont, f.utf = 2, append(f.utf[:0], b)
		return dst
	case b >= 0xf0 && b <= 0xf4:
		f.cont, f.utf = 3, append(f.utf[:0], b)
		return dst
	}
	return f.endPass(dst, []byte{b}) // C0, C1, stray bytes
}

// endPass ends an allowed OSC with BEL and reads rest afresh.
func (f *Filter) endPass(dst, rest []byte) []byte {
	f.st, f.cont = ground, 0
	dst = append(dst, 0x07)
	for _, r := range append([]byte(nil), rest...) {
		dst = f.step(dst, r)
	}
	return dst
}

// stepDrop reads a byte inside a dropped string.
func (f *Filter) stepDrop(dst []byte, b byte) []byte {
	switch f.st {
	case drop:
		switch b {
		case 0x07:
			if !f.dcs {
				f.st = ground
			}
		case 0x18, 0x1a, 0x9c:
			f.st = ground
		case 0x1b:
			f.st = dropEsc
		case 0xc2:
			f.st = dropC2
		}
	case dropEsc:
		switch {
		case b == '\\':
			f.st = ground
		case f.dcs:
			f.st = drop // ESC ESC is a literal ESC in a DCS (tmux); drop more, never less
		default:
			f.st = esc // ESC x ends an OSC, APC, PM or SOS (xterm): x begins a sequence
			return f.step(dst, b)
		}
	case dropC2:
		f.st = drop
		if b == 0x9c {
			f.st = ground
		}
	}
	return dst
}

// withheld reports whether the control sequence with final byte final and
// parameters p is one a Filter drops:
//   - a request to report the icon label (CSI 20 t) or the window title
//     (CSI 21 t): the answer, typed into agentjail's stdin, is text of the
//     agent's choosing (it sets the title), and one that comes as the
//     agent exits is read by the operator's shell;
//   - setting or resetting the ANSI modes that take the keyboard from the
//     operator: KAM (2; set, xterm locks the keyboard, ~. included) and
//     SRM (12, local echo: a password typed after the run would show).
//     Terminals disagree on which of SRM's states echoes, so neither is
//     passed, and ScreenReset cannot set it back.
func withheld(final byte, p []byte) bool {
	if final != 't' && final != 'h' && final != 'l' || len(p) > 0 && (p[0] < '0' || p[0] > ';') {
		return false // none of those, or a private sequence (CSI ? …, CSI > …)
	}
	n := splitParams(p)
	switch final {
	case 't':
		return len(n) > 0 && (n[0] == 20 || n[0] == 21)
	case 'h', 'l':
		return slices.Contains(n, 2) || slices.Contains(n, 12)
	}
	return false
}

// track notes the modes a control sequence with final byte final sets or
// resets, of those ScreenReset leaves alone.
func (f *Filter) track(final byte, p []byte) {
	switch {
	case final == 'q' && len(p) > 0 && p[len(p)-1] == ' ':
		f.Seen.CursorStyle = true
	case (final == 'h' || final == 'l') && len(p) > 0 && p[0] == '?':
		set := final == 'h'
		for _, n := range splitParams(p[1:]) {
			switch n {
			case 1049, 1047, 47:
				f.Seen.AltScreen = set
			case 6:
				f.Seen.OriginMode = set
			}
		}
	}
}

// splitParams reads a control sequence's numeric parameters.
func splitParams(p []byte) []int {
	var out []int
	n := 0
	for _, b := range p {
		switch {
		case b >= '0' && b <= '9':
			n = min(n*10+int(b-'0'), 1<<20)
		case b == ';':
			out = append(out, n)
			n = 0
		default:
			return append(out, n)
		}
	}
	return append(out, n)
}
