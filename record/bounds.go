package record

import (
	"encoding/json"
	"unicode/utf8"
)

// What the record keeps of what a jailed agent prints about itself, which
// it writes as it likes (the claude and codex parsers): ids and kinds of
// at most MaxID bytes, texts of at most ExcerptBytes, usage only as a JSON
// object of at most MaxUsage bytes.
const (
	MaxID        = 256
	ExcerptBytes = 4 << 10
	MaxUsage     = 64 << 10
)

// Cut cuts s to at most n bytes on a character boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// KeepsUsage reports whether the record keeps raw as an agent's usage: a
// JSON object of at most MaxUsage bytes.
func KeepsUsage(raw json.RawMessage) bool {
	return len(raw) > 0 && len(raw) <= MaxUsage && raw[0] == '{'
}
