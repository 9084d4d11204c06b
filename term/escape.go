package term

// EscapeChar begins an escape sequence the operator types to agentjail
// rather than to the agent, as ssh's: recognised only at the start of a
// line (after Enter or at the start of the run), and only before one of
// the commands below; before anything else it is passed on with what
// follows.
const EscapeChar = '~'

// The escape commands: ~. ends the run (as `agentjail stop` does), ~?
// lists them, ~~ sends one ~.
const (
	EscapeEnd  = '.'
	EscapeHelp = '?'
)

// EscapeHelpText is what ~? prints (on a raw terminal, hence \r\n).
const EscapeHelpText = "\r\nagentjail escape sequences (after Enter):\r\n" +
	"  ~.  end the run (the agent gets SIGTERM, then SIGKILL after the grace)\r\n" +
	"  ~?  this help\r\n" +
	"  ~~  send ~\r\n"

// Escapes finds escape sequences in what the operator types. The zero
// value is at the start of a line.
type Escapes struct {
	mid  bool // not at the start of a line
	held bool // a ~ at the start of a line, not passed on yet
}

// Input appends to dst what of p goes to the agent, and calls on with each
// escape command found, in order.
func (e *Escapes) Input(dst, p []byte, on func(cmd byte)) []byte {
	for _, b := range p {
		if e.held {
			e.held = false
			switch b {
			case EscapeEnd, EscapeHelp:
				on(b)
				continue
			case EscapeChar:
				e.mid = true
				dst = append(dst, b)
				continue
			}
			dst = append(dst, EscapeChar)
		} else if b == EscapeChar && !e.mid {
			e.held = true
			continue
		}
		e.mid = b != '\r' && b != '\n'
		dst = append(dst, b)
	}
	return dst
}
