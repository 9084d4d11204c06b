package mounts

import (
	"bytes"
	"strconv"
	"strings"
)

// gitVar is one variable of a git configuration file, named as git names
// it: section and key lowercased, a subsection as written
// ("includeif.gitdir:~/work/.path"). A key without "=" has no value (set
// false), which git takes for boolean true.
type gitVar struct {
	name, value string
	set         bool
}

// parseGitConfig reads a configuration file as git does (config.c,
// git_parse_source, git 2.39): up to the first line git rejects, where git
// stops too (and dies). What the file says to git, nothing more and nothing
// less, is what decides which includes and hooks agentjail must protect, so
// this follows git's reader character by character rather than a friendlier
// grammar: a same-line "[include]path=x", a key continued over lines with a
// backslash, quotes in the middle of a value, CRLF line ends and a UTF-8 BOM
// all count as git counts them.
func parseGitConfig(data []byte) []gitVar {
	c := cfgReader{data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))}
	var out []gitVar
	var section []byte // "include", "includeif.gitdir:x" (with its dot added below)
	comment := false
	for {
		ch := c.next()
		switch {
		case ch == '\n':
			if c.eof {
				return out
			}
			comment = false
			continue
		case comment || gitSpace(ch):
			continue
		case ch == '#' || ch == ';':
			comment = true
			continue
		case ch == '[':
			var ok bool
			if section, ok = c.section(); !ok || len(section) == 0 {
				return out
			}
			continue
		case !gitAlpha(ch):
			return out
		}
		v, ok := c.variable(section, ch)
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

type cfgReader struct {
	data []byte
	pos  int
	eof  bool
}

// next is git's get_next_char: CRLF reads as LF, and the end of the data
// as an endless run of LF with eof set.
func (c *cfgReader) next() byte {
	if c.pos >= len(c.data) {
		c.eof = true
		return '\n'
	}
	ch := c.data[c.pos]
	c.pos++
	if ch == '\r' && c.pos < len(c.data) && c.data[c.pos] == '\n' {
		c.pos++
		ch = '\n'
	}
	return ch
}

// section reads a header after its "[" (get_base_var and
// get_extended_base_var): `[core]`, `[branch.main]` (a legacy subsection,
// lowercased), `[includeIf "gitdir:~/x/"]` (the subsection as written,
// backslash escaping the next character).
func (c *cfgReader) section() ([]byte, bool) {
	var name []byte
	for {
		ch := c.next()
		if c.eof {
			return nil, false
		}
		switch {
		case ch == ']':
			return name, true
		case gitSpace(ch):
			for gitSpace(ch) {
				if ch == '\n' {
					return nil, false
				}
				ch = c.next()
			}
			if ch != '"' {
				return nil, false
			}
			name = append(name, '.')
			for {
				ch = c.next()
				if ch == '\n' {
					return nil, false
				}
				if ch == '"' {
					break
				}
				if ch == '\\' {
					if ch = c.next(); ch == '\n' {
						return nil, false
					}
				}
				name = append(name, ch)
			}
			return name, c.next() == ']'
		case !gitKeyChar(ch) && ch != '.':
			return nil, false
		}
		name = append(name, gitLower(ch))
	}
}

// variable reads a key, whose first letter is first, and its value
// (get_value, parse_value).
func (c *cfgReader) variable(section []byte, first byte) (gitVar, bool) {
	name := append(append([]byte{}, section...), '.')
	if len(section) == 0 {
		name = name[:0]
	}
	name = append(name, gitLower(first))
	var ch byte
	for {
		ch = c.next()
		if c.eof || !gitKeyChar(ch) {
			break
		}
		name = append(name, gitLower(ch))
	}
	for ch == ' ' || ch == '\t' {
		ch = c.next()
	}
	if ch == '\n' {
		return gitVar{name: string(name)}, true
	}
	if ch != '=' {
		return gitVar{}, false
	}
	var value []byte
	quote, comment, space := false, false, 0
	for {
		ch = c.next()
		if ch == '\n' {
			if quote {
				return gitVar{}, false
			}
			// git hands the value on as a C string: it ends at a NUL.
			value, _, _ = bytes.Cut(value, []byte{0})
			return gitVar{name: string(name), value: string(value), set: true}, true
		}
		switch {
		case comment:
			continue
		case gitSpace(ch) && !quote:
			if len(value) > 0 {
				space++
			}
			continue
		case !quote && (ch == ';' || ch == '#'):
			comment = true
			continue
		}
		for ; space > 0; space-- {
			value = append(value, ' ')
		}
		switch ch {
		case '\\':
			switch ch = c.next(); ch {
			case '\n':
				continue
			case 't':
				ch = '\t'
			case 'b':
				ch = '\b'
			case 'n':
				ch = '\n'
			case '\\', '"':
			default:
				return gitVar{}, false
			}
		case '"':
			quote = !quote
			continue
		}
		value = append(value, ch)
	}
}

// git's own ctype (ctype.c): space is only HT, LF, CR and SP; letters and
// digits are ASCII.
func gitSpace(c byte) bool   { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func gitAlpha(c byte) bool   { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func gitKeyChar(c byte) bool { return gitAlpha(c) || c >= '0' && c <= '9' || c == '-' }
func gitLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c | 0x20
	}
	return c
}

// gitBool reads v as git reads a boolean (git_parse_maybe_bool, then
// an integer as strtoimax takes it, with a unit suffix); ok is false when v
// is neither, which for core.fsmonitor means that it names a command.
func gitBool(v gitVar) (value, ok bool) {
	if !v.set {
		return true, true
	}
	switch strings.ToLower(v.value) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off", "":
		return false, true
	}
	s := strings.TrimLeft(v.value, " \t\n\v\f\r")
	if n := len(s); n > 0 && strings.ContainsRune("kKmMgG", rune(s[n-1])) {
		s = s[:n-1]
	}
	n, err := strconv.ParseInt(s, 0, 64)
	return n != 0, err == nil
}
