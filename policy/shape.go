package policy

import (
	"fmt"
	"io"

	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// Limits on a profile's text, checked on the scanner's tokens before the
// YAML parser sees them. A size cap alone does not bound the parser's
// memory: every node keeps the path from the root to it (goccy/go-yaml
// parser/context.go, withChild and withIndex), so memory grows with
// nesting times size, or key length times size: a small file of unclosed
// [, or of one long key and short entries under it, takes gigabytes.
// Aliases are refused outright: merge keys (<<: [*a, *a]) over aliases of
// aliases make the decoder's work exponential in the number of lines.
const (
	// MaxFileSize caps every file agentjail reads as input: a profile, a
	// profile it extends, a seccomp profile: well above every built-in
	// profile and Docker's default seccomp profile, and small, since the
	// YAML library takes hundreds of bytes of memory per byte of text.
	MaxFileSize = 128 << 10
	// maxDepth caps the nesting of collections; a profile needs 5
	// (filesystem.tmpfs./tmp.size, or a list in a flow mapping).
	maxDepth = 32
	// maxKey caps a mapping key: field names, variable names and mount
	// points, which are paths (PATH_MAX).
	maxKey = 4096
	// maxPaths caps the bytes of the parser's node paths: for each token,
	// the nesting depth times the longest key so far, an upper bound on
	// the length of the path the parser builds for it.
	maxPaths = 16 << 20
)

// scan tokenizes a profile as the YAML parser's lexer does
// (lexer.Tokenize), checking its shape as it goes: it stops at the first
// token past a limit, so the tokens of a hostile file are never all held.
func scan(name string, data []byte) (token.Tokens, error) {
	var s scanner.Scanner
	s.Init(string(data))
	var tokens token.Tokens
	var sh shape
	for {
		sub, err := s.Scan()
		if err == io.EOF {
			break
		}
		for _, tk := range sub {
			if msg := sh.see(tk); msg != "" {
				return nil, fmt.Errorf("%s:%d:%d: %w: %s", name, tk.Position.Line, tk.Position.Column, ErrSyntax, msg)
			}
		}
		tokens.Add(sub...)
	}
	if sh.prev != nil && sh.prev.Type == token.AliasType {
		return nil, fmt.Errorf("%s:%d:%d: %w: a lone *; a profile may not use YAML aliases", name, sh.prev.Position.Line, sh.prev.Position.Column, ErrSyntax)
	}
	return tokens, nil
}

// shape follows the nesting of a token stream: the open flow collections
// ([ and {), and, outside them, a stack of block collections by the column
// of their indicator or first key, as a YAML scanner's indentation stack
// does. It overestimates rather than underestimates: a depth it misses
// would be memory the parser spends unchecked.
type shape struct {
	flow   int
	block  []level
	prev   *token.Token
	keyMax int // the longest key so far
	paths  int // the sum of depth × (keyMax + room for "[123]" or quotes)
}

type level struct {
	col int
	seq bool
}

// see takes the next token; it returns why the text is refused, or "".
func (sh *shape) see(tk *token.Token) string {
	if tk.Type == token.CommentType || tk.Type == token.SpaceType {
		return ""
	}
	prev := sh.prev
	sh.prev = tk
	if prev != nil && prev.Type == token.AliasType {
		return fmt.Sprintf("the alias *%s: a profile may not use YAML aliases; write the value out (quote a pattern that starts with *: \"*.pem\")", tk.Value)
	}
	switch tk.Type {
	case token.MappingKeyType:
		return "explicit keys (? key) are not used in a profile; write key: value"
	case token.DocumentHeaderType, token.DocumentEndType:
		sh.flow, sh.block = 0, nil
	case token.SequenceStartType, token.MappingStartType:
		sh.flow++
	case token.SequenceEndType, token.MappingEndType:
		sh.flow = max(sh.flow-1, 0)
	case token.SequenceEntryType:
		if sh.flow == 0 {
			sh.push(tk.Position.Column, true)
		}
	case token.MappingValueType:
		// The key is the token before; counted even where it is not
		// one (the colon of an empty key), to err on the high side.
		col := tk.Position.Column
		if prev != nil {
			if n := len(prev.Value); n > sh.keyMax {
				if n > maxKey {
					return fmt.Sprintf("a key of %d bytes; a key is a field name, a variable name or a path, at most %d bytes", n, maxKey)
				}
				sh.keyMax = n
			}
			if prev.Position.Line == tk.Position.Line {
				col = prev.Position.Column
			}
		}
		if sh.flow == 0 {
			sh.push(col, false)
		}
	}
	depth := len(sh.block) + sh.flow
	if depth > maxDepth {
		return fmt.Sprintf("nested more than %d levels deep (a profile needs 5); look for an unclosed [ or {", maxDepth)
	}
	if sh.paths += depth * (sh.keyMax + 16); sh.paths > maxPaths {
		return fmt.Sprintf("too many values under keys of up to %d bytes for the YAML parser (it keeps each value's path from the root); shorten the keys", sh.keyMax)
	}
	return ""
}

// push opens a block collection at col unless one of the same kind is
// open there (a sibling); a sequence may sit at its mapping's column.
func (sh *shape) push(col int, seq bool) {
	for len(sh.block) > 0 && sh.block[len(sh.block)-1].col > col {
		sh.block = sh.block[:len(sh.block)-1]
	}
	if n := len(sh.block); n > 0 && sh.block[n-1].col == col {
		top := sh.block[n-1]
		if top.seq == seq {
			return
		}
		if top.seq && !seq {
			// Back from a sequence at its mapping's column to the mapping.
			sh.block = sh.block[:n-1]
			if n > 1 && sh.block[n-2].col == col && !sh.block[n-2].seq {
				return
			}
		}
	}
	sh.block = append(sh.block, level{col, seq})
}
