package record

import (
	"slices"
	"strings"
)

// Redact replaces every secret in s by "[redacted]". Values shorter than
// MinSecret bytes are not looked for: they would match ordinary text.
func Redact(s string, secrets []string) string {
	s, _, _ = RedactExcerpt(s, "", 0, secrets, nil)
	return s
}

// MinSecret is the length below which an environment value is not
// redacted (docs/supervision.md, the run record).
const MinSecret = 6

// RedactExcerpt redacts head and tail, the kept ends of one text of which
// omitted bytes between them were left out (tail may be empty: only a head
// kept), and returns them with the count of bytes left out now. Every
// secret in either is masked; so is one that straddles them when nothing
// was left out. hidden are the secrets the jail does not hold (the
// broker's): where bytes were left out, one that they cut would show in
// part, so the head and the tail each give up as many bytes at the cut as
// the longest of them has, rounded up to 512 (a length cut would tell a
// later run the credential's), whatever they hold, which join the
// left-out ones. Masking only the parts that matched told a later run,
// which could read the record, whether its guess at the first bytes was
// right, one guess a stream at a time. Each maximal masked run becomes one
// "[redacted]".
func RedactExcerpt(head, tail string, omitted int64, secrets, hidden []string) (string, string, int64) {
	text := head + tail
	var masked []bool // lazily: most excerpts hold no secret
	for _, v := range slices.Concat(secrets, hidden) {
		if len(v) < MinSecret {
			continue
		}
		for i := 0; ; i++ {
			j := strings.Index(text[i:], v)
			if j < 0 {
				break
			}
			i += j
			if masked == nil {
				masked = make([]bool, len(text))
			}
			for k := i; k < i+len(v); k++ {
				masked[k] = true
			}
		}
	}
	// Masked first, then cut: a whole secret across the cut is masked
	// in the part that stays.
	h, t := len(head), len(head)
	if omitted > 0 {
		longest := 0
		for _, v := range hidden {
			if len(v) >= MinSecret {
				longest = max(longest, len(v))
			}
		}
		// Whole 512-byte steps: what is cut says nothing of the length.
		if cut := (longest + 511) / 512 * 512; longest > 0 {
			h, t = len(head)-min(cut, len(head)), len(head)+min(cut, len(tail))
			omitted += int64(len(head) - h + t - len(head))
		}
	}
	if masked == nil {
		return text[:h], text[t:], omitted
	}
	return masking(text[:h], masked[:h]), masking(text[t:], masked[t:]), omitted
}

// masking replaces each run of masked bytes of s by "[redacted]".
func masking(s string, masked []bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !masked[i] {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString("[redacted]")
		for i+1 < len(s) && masked[i+1] {
			i++
		}
	}
	return b.String()
}

// ExcerptOf renders one stream's excerpt for the record: redacted first
// (RedactExcerpt), on the bytes as written, then made valid UTF-8.
func ExcerptOf(head, tail []byte, omitted int64, secrets, hidden []string) Excerpt {
	h, t, omitted := RedactExcerpt(string(head), string(tail), omitted, secrets, hidden)
	return Excerpt{
		Head:         strings.ToValidUTF8(h, "\uFFFD"),
		Tail:         strings.ToValidUTF8(t, "\uFFFD"),
		OmittedBytes: omitted,
	}
}
